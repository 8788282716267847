"""A debug container added through ``pods/<name>/ephemeralcontainers`` reaches the parent:
the API pod source passes on a change of spec.ephemeralContainers like any spec change."""

from __future__ import annotations

from typing import Any

from pkletd.ipc.apiclient.reflector import Changed, Listed, Reflector, Seen
from pkletd.ipc.bus.messages import Message, PodsListed, Snapshot
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.apiwatcher import ApiWatcher


class FakeBus:
    def __init__(self) -> None:
        self.sent: list[Message] = []

    def send(self, message: Message) -> None:
        self.sent.append(message)


class IdleReflector:
    def stop(self) -> None:
        pass


def api_pod(version: str, *ephemeral: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}
    if ephemeral:
        spec["ephemeralContainers"] = list(ephemeral)
    meta = {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": version}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def test_an_added_ephemeral_container_is_sent_to_the_parent() -> None:
    bus, inbox, reflector = FakeBus(), Inbox[Seen](), IdleReflector()
    worker = ApiWatcher(bus, reflector, inbox)  # type: ignore[arg-type]
    worker.on_snapshot(Snapshot(0, [], {}))
    debugger = {"name": "debugger", "image": "busybox", "targetContainerName": "c"}
    source: Reflector = reflector  # type: ignore[assignment]
    for item in (
        Listed(source, [api_pod("1")]),
        Changed(source, "MODIFIED", api_pod("2", debugger)),
        Changed(source, "MODIFIED", api_pod("3", debugger)),  # its status written: no news
    ):
        inbox.put(item)
        worker.on_readable(inbox.fileno())
    sent = [m.pods for m in bus.sent if isinstance(m, PodsListed)]
    assert [[p["spec"].get("ephemeralContainers") for p in pods] for pods in sent] == [
        [None],
        [[debugger]],
    ]
