"""pkletd: http-source -- pods from ``staticPodURL``, as the kubelet's URL source reads them.

A worker of its own because it parses untrusted input, like the file source. It
follows the kubelet's ``pkg/kubelet/config/http.go``:

- GET the URL every ``httpCheckFrequency`` (counted from the end of the previous
  fetch), with the ``staticPodURLHeader`` headers, a 10 s timeout, and at most
  10 MiB of body;
- a body is a single Pod or a PodList, YAML or JSON; every pod gets the static-pod
  identity (``manifests.py``; the generated UID comes from the pod and
  ``url:<url>``; source ``http``), and the whole set is sent (``PodsListed``);
- a body identical to the last one is not parsed again;
- a pod marked deleted (``metadata.deletionTimestamp``) is left out and reported,
  as a duplicate name is, and the other pods go on;
- a failed fetch (connection error, timeout, a status other than 200) or a body
  that is not a valid Pod or PodList (one invalid pod rejects the whole list)
  keeps the last good set: the reason is logged and sent once
  (``ManifestRejected`` naming the URL) until it changes or the URL answers well
  again, which is said too (``ManifestAccepted``);
- an empty 200 body is an error too, but the kubelet still sends an empty set for
  it (so the source counts as seen): pods from the URL are removed.

The fetch, and the parse of a new body (up to 10 MiB of YAML), run in a thread
that hands the outcome to the worker's loop through a pipe, so neither a slow
server nor a big body holds up heartbeats.
"""

from __future__ import annotations

import http.client
import ipaddress
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from pkletd.ipc.apimodel.manifests import (
    ManifestError,
    first_of_each_name,
    load_documents,
    marked_deleted,
    static_pod,
    url_origin,
)
from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.bus.messages import (
    ManifestAccepted,
    ManifestRejected,
    Message,
    PodsListed,
    Snapshot,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)

SOURCE = PodSource.HTTP
TIMEOUT_S = 10.0  # the kubelet's client timeout for the manifest URL
MAX_BODY = 10 << 20  # the kubelet's maxConfigLength

Headers = tuple[tuple[str, str], ...]


class FetchError(Exception):
    """The URL did not give a body to read; the message says why."""


def request_headers(headers: Headers) -> dict[str, str]:
    """One header per name; several values of a name are joined by ", " (RFC 9110 5.3)."""
    joined: dict[str, list[str]] = {}
    for key, value in headers:
        joined.setdefault(key, []).append(value)
    return {key: ", ".join(values) for key, values in joined.items()}


def _opener(url: str) -> urllib.request.OpenerDirector:
    """HTTP(S) only, redirects followed; proxies from the environment, except for
    loopback hosts (as Go's client does)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler({} if loopback else None),
        urllib.request.UnknownHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPRedirectHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def fetch(url: str, headers: Headers, timeout: float = TIMEOUT_S) -> bytes:
    """The body of a GET of ``url``; FetchError unless it answered 200 within the limits."""
    request = urllib.request.Request(url, headers=request_headers(headers), method="GET")
    try:
        with _opener(url).open(request, timeout=timeout) as reply:
            body = bytes(reply.read(MAX_BODY + 1))
            status, reason = reply.status, reply.reason
    except urllib.error.HTTPError as exc:
        exc.close()
        raise FetchError(f"{url}: {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(f"{url}: {exc.reason}") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise FetchError(f"{url}: {exc or type(exc).__name__}") from None
    if len(body) > MAX_BODY:
        raise FetchError(f"{url}: body larger than {MAX_BODY} bytes")
    if status != 200:
        raise FetchError(f"{url}: {status} {reason}")
    return body


def pods_from_body(
    body: bytes, url: str, node_name: str
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The pods in a body (a Pod or a PodList), with identity; and those dropped (a
    duplicate name, marked deleted) with why.

    ManifestError if the body as a whole cannot be used (the kubelet keeps its last
    set then).
    """
    try:
        text = body.decode()
    except UnicodeDecodeError as exc:
        raise ManifestError(f"not UTF-8 text: {exc}") from None
    documents = load_documents(text)
    if len(documents) != 1:
        raise ManifestError(f"want one Pod or PodList, found {len(documents)} documents")
    (document,) = documents
    if not isinstance(document, dict):
        raise ManifestError("not a Pod or a PodList: the document is not a mapping")
    kind = document.get("kind")
    origin = url_origin(url)
    if kind == "PodList":
        if document.get("apiVersion", "v1") != "v1":
            raise ManifestError(f"apiVersion: must be v1, got {document.get('apiVersion')!r}")
        items = document.get("items") or []
        if not isinstance(items, list):
            raise ManifestError("items: must be a list")
        pods = []
        for i, item in enumerate(items):
            try:
                pods.append(static_pod(item, SOURCE, origin, node_name))
            except ManifestError as exc:
                raise ManifestError(f"items[{i}]: {exc}") from None
    elif kind in (None, "Pod"):
        pods = [static_pod(document, SOURCE, origin, node_name)]
    else:
        raise ManifestError(f"not a Pod or a PodList: kind {kind!r}")
    deleted = [(url, why) for why in map(marked_deleted, pods) if why is not None]
    kept, duplicates = first_of_each_name((url, p) for p in pods if not marked_deleted(p))
    return kept, deleted + duplicates


Fetcher = Callable[[str, Headers], bytes]
Parsed = tuple[list[dict[str, Any]], list[tuple[str, str]]] | ManifestError
Outcome = tuple[bytes | FetchError, Parsed | None]


class HttpSource:
    def __init__(
        self,
        bus: Sender,
        url: str,
        headers: Headers,
        node_name: str,
        period: float,
        fetcher: Fetcher = fetch,
    ) -> None:
        self._bus = bus
        self._url = url
        self._headers = headers
        self._node = node_name
        self._period = period
        self._fetcher = fetcher
        self._outcomes: Inbox[Outcome] = Inbox()  # a fetch that ends after close() is dropped
        self._fetching = False
        self._next_fetch = 0.0
        self._last_body: bytes | None = None  # the last non-empty body parsed
        self._body_problem = ""  # what was wrong with it ("" if nothing)
        self._sent: list[dict[str, Any]] | None = None
        self._reported = ""  # the problem last reported; "" while all is well

    # --- the Worker protocol -----------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._sent = None  # the parent may have lost our last set: send it again
        self._last_body = None
        self._reported = ""  # ... and what we rejected
        self._next_fetch = 0.0

    def on_broadcast(self, message: Message) -> None:
        pass

    def fds(self) -> Sequence[int]:
        return (self._outcomes.fileno(),)

    def on_readable(self, fd: int) -> None:
        for outcome, parsed in self._outcomes.take():
            self._fetching = False
            self._next_fetch = time.monotonic() + self._period
            self.on_fetched(outcome, parsed)

    def tick(self, now: float) -> float:
        if not self._fetching and now >= self._next_fetch:
            self._fetching = True
            threading.Thread(target=self._fetch, name="fetch", daemon=True).start()
        return now + self._period if self._fetching else self._next_fetch

    def close(self) -> None:
        self._outcomes.close()

    # --- fetching and parsing (in a thread) ------------------------------------------

    def _fetch(self) -> None:
        parsed: Parsed | None = None
        outcome: bytes | FetchError
        try:
            body = self._fetcher(self._url, self._headers)
            if body and body != self._last_body:  # read by one thread at a time
                parsed = self._parse(body)
            outcome = body
        except FetchError as exc:
            outcome = exc
        except Exception as exc:  # a bug must not leave the source fetching for ever
            log.exception("fetch failed url=%s", self._url)
            outcome = FetchError(f"{self._url}: {exc}")
        self._outcomes.put((outcome, parsed))

    def _parse(self, body: bytes) -> Parsed:
        try:
            return pods_from_body(body, self._url, self._node)
        except ManifestError as exc:
            return exc

    # --- what a fetch means ------------------------------------------------------------

    def on_fetched(self, outcome: bytes | FetchError, parsed: Parsed | None = None) -> None:
        """Act on a fetch; ``parsed`` is the body already parsed, if it was."""
        if isinstance(outcome, FetchError):
            self._problem(str(outcome))
            return
        if not outcome:
            self._send([])  # as the kubelet: the source is seen, its pods are gone
            self._last_body = None
            self._problem(f"zero-length data received from {self._url}")
            return
        if outcome != self._last_body:
            self._last_body = outcome
            result = parsed if parsed is not None else self._parse(outcome)
            if isinstance(result, ManifestError):
                self._body_problem = str(result)
            else:
                pods, dropped = result
                self._body_problem = "; ".join(reason for _, reason in dropped)
                self._send(pods)
        if self._body_problem:
            self._problem(self._body_problem)
        else:
            self._recovered()

    def _send(self, pods: list[dict[str, Any]]) -> None:
        if pods != self._sent:
            self._bus.send(PodsListed(SOURCE, pods))
            self._sent = pods
            log.info("sent pods source=%s count=%d", SOURCE, len(pods))

    def _problem(self, reason: str) -> None:
        if reason == self._reported:
            return
        self._reported = reason
        log.error("manifest rejected url=%s reason=%s", self._url, reason)
        self._bus.send(ManifestRejected(SOURCE, self._url, reason))

    def _recovered(self) -> None:
        if self._reported:
            log.info("read pods from URL again url=%s", self._url)
            self._reported = ""
            self._bus.send(ManifestAccepted(SOURCE, self._url))


def main(
    settings: WorkerSettings, url: str, headers: Headers, node_name: str, period: float
) -> int:
    bus = WorkerBus(settings.run_dir, settings.name, broadcasts=False)  # needs none
    return serve(settings, bus, HttpSource(bus, url, headers, node_name, period))
