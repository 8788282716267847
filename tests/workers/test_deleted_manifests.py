"""A static manifest whose pod is marked deleted (metadata.deletionTimestamp) is not run and
is not dropped in silence: the sources name the file or URL and why, say when it reads well
again, and ``pkletd status`` shows it while it is rejected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pkletd.ipc.bus.messages import (
    ManifestAccepted,
    ManifestRejected,
    Message,
    PodsListed,
    Snapshot,
)
from pkletd.supervisor.cli import format_status
from pkletd.supervisor.pods.rejectedmanifests import RejectedManifests
from pkletd.workers.filesource import FileSource
from pkletd.workers.httpsource import HttpSource, pods_from_body

NODE = "node-a"
URL = "http://127.0.0.1:1/pods"
DELETED = "2026-11-24T10:00:00Z"


def pod(name: str, deleted: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleted:
        meta["deletionTimestamp"] = DELETED
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def why(name: str) -> str:
    return (
        f"pod default/{name}-{NODE}: metadata.deletionTimestamp is set: a static pod marked "
        "deleted is not run (remove the manifest to delete the pod)"
    )


class FakeBus:
    def __init__(self) -> None:
        self.sent: list[Message] = []

    def send(self, message: Message) -> None:
        self.sent.append(message)

    def take(self) -> list[Message]:
        sent, self.sent = self.sent, []
        return sent


class NoInotify:
    fd = -1
    watching = True

    def watch(self, path: Path) -> bool:
        return True

    def drain(self) -> bool:
        return False

    def close(self) -> None:
        pass


def read(source: FileSource, bus: FakeBus) -> list[Message]:
    source._read_all()
    return bus.take()


def test_the_file_source_names_the_file_and_why(tmp_path: Path) -> None:
    bus = FakeBus()
    source = FileSource(bus, tmp_path, NODE, 20.0, NoInotify())  # type: ignore[arg-type]
    (tmp_path / "web.yaml").write_text(json.dumps(pod("web")))
    (listed,) = read(source, bus)
    assert isinstance(listed, PodsListed) and len(listed.pods) == 1

    marked = tmp_path / "web.yaml"
    marked.write_text(json.dumps(pod("web", deleted=True)))
    rejected, listed = read(source, bus)
    assert rejected == ManifestRejected("file", str(marked), why("web"))
    assert listed == PodsListed("file", [])  # the pod is stopped at once
    assert read(source, bus) == []  # said once

    source.on_snapshot(Snapshot(0, [], {}))  # a restarted parent hears it again
    assert read(source, bus) == [rejected, listed]

    marked.write_text(json.dumps(pod("web")))
    accepted, listed = read(source, bus)
    assert accepted == ManifestAccepted("file", str(marked))
    assert isinstance(listed, PodsListed) and len(listed.pods) == 1

    marked.write_text(json.dumps(pod("web", deleted=True)))
    read(source, bus)
    marked.unlink()  # a rejected file removed is no longer rejected
    assert read(source, bus) == [ManifestAccepted("file", str(marked))]


def test_the_http_source_leaves_out_the_pod_marked_deleted() -> None:
    body = json.dumps(
        {"kind": "PodList", "items": [pod("a"), pod("b", deleted=True), pod("a")]}
    ).encode()
    kept, dropped = pods_from_body(body, URL, NODE)
    assert [p["metadata"]["name"] for p in kept] == [f"a-{NODE}"]
    assert dropped == [
        (URL, why("b")),
        (URL, f"duplicate pod name default/a-{NODE} (first from {URL})"),
    ]

    bus = FakeBus()
    worker = HttpSource(bus, URL, (), NODE, 20.0)  # type: ignore[arg-type]
    try:
        worker.on_fetched(json.dumps(pod("b", deleted=True)).encode())
        listed, rejected = bus.take()
        assert listed == PodsListed("http", [])
        assert rejected == ManifestRejected("http", URL, why("b"))
        worker.on_fetched(json.dumps(pod("b")).encode())
        listed, accepted = bus.take()
        assert isinstance(listed, PodsListed) and len(listed.pods) == 1
        assert accepted == ManifestAccepted("http", URL)
    finally:
        worker.close()


def test_pkletd_status_shows_the_rejected_manifests() -> None:
    found = RejectedManifests()
    found.rejected("file", "/etc/kubernetes/manifests/web.yaml", why("web"), 100.0)
    found.rejected("http", URL, f"{URL}: 500 Internal Server Error", 101.0)
    found.rejected("file", "/etc/kubernetes/manifests/web.yaml", why("web"), 200.0)
    assert [m["since"] for m in found.status()] == [100.0, 101.0]  # the same reason: since then
    status = {
        "node": {"name": "n", "joined": False},
        "workers": [],
        "pods": [],
        "manifests": found.status(),
    }
    lines = format_status(status).splitlines()
    assert lines[-3].split() == ["MANIFEST", "REJECTED", "REASON"]
    assert lines[-2].startswith("/etc/kubernetes/manifests/web.yaml")
    assert lines[-2].endswith(why("web"))
    assert lines[-1].split()[:2] == [URL, f"{URL}:"]

    found.accepted("file", "/etc/kubernetes/manifests/web.yaml")
    found.forget("http")  # its worker got a snapshot: it says them again
    assert found.status() == []
    assert "MANIFEST REJECTED" not in format_status({**status, "manifests": []})
