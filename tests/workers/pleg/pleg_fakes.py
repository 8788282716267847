"""Fakes for PLEG's unit tests: an event source whose streams the test drives, the
runtime's sandboxes and containers (for ``FakeRuntime``), and a wait for the worker's
inbox."""

from __future__ import annotations

import queue
import select
from collections.abc import Iterator

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.runtime.cri import (
    ContainerID,
    ContainerInfo,
    ContainerState,
    SandboxID,
    SandboxInfo,
    SandboxState,
)
from pkletd.ipc.runtime.events import RuntimeEvent, StreamError
from pkletd.supervisor.pods.fakeruntime import Call, FakeRuntime
from pkletd.workers.pleg.worker import Pleg

POD_UID_LABEL = "io.kubernetes.pod.uid"


def container(
    cid: str,
    state: str,
    uid: str,
    sandbox: str = "s1",
    exit_code: int = 0,
    finished_at: int = 0,
    reason: str = "",
) -> ContainerInfo:
    return ContainerInfo(
        id=ContainerID(cid),
        sandbox_id=SandboxID(sandbox),
        name="c",
        attempt=0,
        state=ContainerState(state),
        created_at=0,
        image="busybox",
        image_ref="busybox",
        labels={POD_UID_LABEL: uid},
        annotations={},
        finished_at=finished_at,
        exit_code=exit_code,
        reason=reason,
    )


def sandbox(sid: str, state: str, uid: str) -> SandboxInfo:
    return SandboxInfo(
        id=SandboxID(sid),
        name="p",
        namespace="default",
        uid=PodUID(uid),
        attempt=0,
        state=SandboxState(state),
        created_at=0,
        labels={POD_UID_LABEL: uid},
        annotations={},
    )


def relists(runtime: FakeRuntime) -> int:
    """How many full relists PLEG made (a ListPodSandbox of every pod)."""
    return runtime.calls.count(Call("ListPodSandbox", ""))


class FakeStream:
    """A subscription the test feeds (``push``) and ends (``end``); ``refused`` ends it
    at once, as a runtime without the events API does."""

    def __init__(self, refused: str = "") -> None:
        self._items: queue.SimpleQueue[RuntimeEvent | StreamError] = queue.SimpleQueue()
        self._active = not refused
        if refused:
            self._items.put(StreamError(refused, "unknown service"))

    def __iter__(self) -> Iterator[RuntimeEvent]:
        while True:
            item = self._items.get(timeout=30)
            if isinstance(item, StreamError):
                self._active = False
                raise item
            yield item

    def push(self, event: RuntimeEvent) -> None:
        self._items.put(event)

    def end(self, code: str, detail: str) -> None:
        self._items.put(StreamError(code, detail))

    def active(self) -> bool:
        return self._active

    def cancel(self) -> None:
        self.end("CANCELLED", "Locally cancelled by application!")


class FakeSource:
    """Hands out streams: refused ones while ``refusing`` names a gRPC code."""

    def __init__(self) -> None:
        self.streams: list[FakeStream] = []
        self.refusing = ""
        self.closed = False

    def subscribe(self) -> FakeStream:
        stream = FakeStream(self.refusing)
        self.streams.append(stream)
        return stream

    def close(self) -> None:
        self.closed = True


def take_inbox(pleg: Pleg, timeout: float = 10.0) -> None:
    """Wait (with a deadline) until the stream's thread handed the loop something; take it."""
    (fd,) = pleg.fds()
    readable, _, _ = select.select([fd], [], [], timeout)
    if not readable:
        raise AssertionError(f"nothing reached PLEG's inbox within {timeout:.0f}s")
    pleg.on_readable(fd)
