"""List, then watch, on a thread of its own: the API watcher's pods of this node, and
the pod-objects worker's watched ConfigMaps and Secrets, Services and the Node's
object TTL.

As client-go's reflector: the list's resourceVersion starts the watch, every event and
bookmark moves it on, a watch the server ends (after ``timeoutSeconds``, picked
between 5 and 10 minutes so hundreds of watches do not restart together) or a
dropped connection resumes from it, and ``410 Gone`` lists again. A failure waits 1 s,
doubling to 30 s, before the next try. What it sees goes to the worker's ``Inbox`` as
``Listed``, ``Changed`` or ``Broken``, each naming its reflector, so the loop can
drop what a stopped reflector said last.

``final``: an object past which there is nothing to follow (an ``immutable``
ConfigMap or Secret). Once one is seen the thread ends without (another) watch, as
the kubelet stops the reflector of an immutable object.

``stop`` shuts the open watch's socket down, so the thread ends at once rather than
at the next event; its connection is closed, never handed back to the pool mid-stream.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.wakeup import Inbox

log = logging.getLogger(__name__)

Obj = dict[str, Any]
ListCall = Callable[..., Any]  # a CoreV1Api list method, namespace already bound
WATCH_MIN_S = 300.0  # client-go's minWatchTimeout; each watch lasts 1-2x this
READ_SLACK_S = 30.0  # no byte for this long past the timeout: the connection is dead
RETRY_FIRST_S, RETRY_MAX_S = 1.0, 30.0
EXPIRED = 410


@dataclass(frozen=True, slots=True)
class Listed:
    """A full list: these items replace whatever the reflector said before."""

    source: Reflector
    items: list[Obj]


@dataclass(frozen=True, slots=True)
class Changed:
    """One watch event: ``ADDED``, ``MODIFIED`` or ``DELETED``."""

    source: Reflector
    type: str
    obj: Obj


@dataclass(frozen=True, slots=True)
class Broken:
    """A list or watch failed; the reflector tries again after its back-off."""

    source: Reflector
    error: Exception


Seen = Listed | Changed | Broken


class Gone(Exception):
    """The watch's resourceVersion was compacted away: list again."""


class Final(Exception):
    """A final object was seen: nothing more to follow."""


class Reflector:
    def __init__(
        self,
        tag: Hashable,
        list_call: ListCall,
        inbox: Inbox[Seen],
        field_selector: str = "",
        final: Callable[[Obj], bool] = lambda _: False,
    ) -> None:
        self.tag = tag  # what the loop files the results under
        self._list_call = list_call
        self._inbox = inbox
        self._selector = {"field_selector": field_selector} if field_selector else {}
        self._final = final
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None  # the open watch, for stop()

    def start(self) -> None:
        threading.Thread(target=self._run, name=f"reflector-{self.tag}", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            response, self._response = self._response, None
        if response is not None:
            try:
                response.shutdown()
            except (OSError, ValueError, RuntimeError):  # already closed or released
                pass

    # --- the thread ------------------------------------------------------------------

    def _run(self) -> None:
        version = ""
        delay = RETRY_FIRST_S
        while not self._stopped.is_set():
            try:
                if not version:
                    version = self._list()
                version = self._watch(version)
                delay = RETRY_FIRST_S
            except Final:
                return
            except Gone:
                version = ""
            except Exception as exc:  # the connection or the server: try again later
                if self._stopped.is_set():
                    return
                self._put(Broken(self, exc))
                self._stopped.wait(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    def _list(self) -> str:
        response = self._list_call(
            **self._selector,
            _preload_content=False,
            _request_timeout=kubeapi.REQUEST_TIMEOUT_S,
        )
        try:
            body = json.loads(response.data)
        finally:
            response.release_conn()
        items = body.get("items") or []
        self._put(Listed(self, items))
        if any(self._final(item) for item in items):
            raise Final()
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        """Follow changes from ``version`` until the server ends the watch; the last one."""
        timeout = int(WATCH_MIN_S * (1 + random.random()))
        response = self._list_call(
            **self._selector,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            _request_timeout=(kubeapi.REQUEST_TIMEOUT_S, timeout + READ_SLACK_S),
        )
        with self._lock:
            self._response = response
        ended = False
        try:
            if self._stopped.is_set():
                raise Final()
            for event in _events(response):
                version = self._on_event(event, version)
            ended = True
            return version
        finally:
            with self._lock:
                self._response = None
            if ended and not self._stopped.is_set():
                response.release_conn()  # read to its end: the connection is clean
            else:
                response.close()

    def _on_event(self, event: Obj, version: str) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == EXPIRED:
                raise Gone()
            raise RuntimeError(f"watch error: {obj.get('message', obj)}")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._put(Changed(self, kind, obj))
            if kind != "DELETED" and self._final(obj):
                raise Final()
        return str((obj.get("metadata") or {}).get("resourceVersion") or version)

    def _put(self, seen: Seen) -> None:
        if not self._stopped.is_set():
            self._inbox.put(seen)


def _events(response: Any) -> Iterator[Obj]:
    """The watch's events, one JSON object per line, as the chunks arrive."""
    pending = b""
    for chunk in response.stream(decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield json.loads(line)
