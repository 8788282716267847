"""The API pod source's set: what it sends the parent, and what it keeps to itself; and
the API's view it sends for the status manager (``ApiPodsObserved``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pkletd.ipc.apiclient.reflector import Broken, Changed, Listed, Reflector, Seen
from pkletd.ipc.bus.messages import ApiPodsObserved, PodsListed, Snapshot
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.apiwatcher import ApiWatcher, source_view


class IdleReflector:
    def stop(self) -> None:
        pass


REFLECTOR: Reflector = IdleReflector()  # type: ignore[assignment]


def listed(pods: list[dict[str, Any]]) -> Listed:
    return Listed(REFLECTOR, pods)


def changed(kind: str, pod: dict[str, Any]) -> Changed:
    return Changed(REFLECTOR, kind, pod)


def api_pod(uid: str, rv: str = "1", phase: str = "Pending", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "default", "uid": uid,
                     "resourceVersion": rv, "managedFields": [{}], **meta},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": phase, "podIP": "10.0.0.9"},
    }  # fmt: skip


def watcher() -> tuple[ApiWatcher, FakeSender, Inbox[Seen]]:
    bus, inbox = FakeSender(), Inbox[Seen]()
    worker = ApiWatcher(bus, REFLECTOR, inbox)  # type: ignore[arg-type]
    worker.on_snapshot(Snapshot(0, [], {}))
    return worker, bus, inbox


def deliver(worker: ApiWatcher, inbox: Inbox[Seen], *items: Seen) -> None:
    for item in items:
        inbox.put(item)
    worker.on_readable(inbox.fileno())


def sets(bus: FakeSender) -> list[list[str]]:
    return [[p["metadata"]["uid"] for p in m.pods] for m in bus.sent if isinstance(m, PodsListed)]


def source_sets(bus: FakeSender) -> list[PodsListed]:
    return [m for m in bus.sent if isinstance(m, PodsListed)]


def observed(bus: FakeSender) -> list[tuple[bool, list[str], list[str]]]:
    """Each ApiPodsObserved: whole, the uids (and versions) it shows, the uids gone."""
    return [
        (m.whole, [f"{p['metadata']['uid']}@{p['metadata']['resourceVersion']}" for p in m.pods],
         m.gone)
        for m in bus.sent
        if isinstance(m, ApiPodsObserved)
    ]  # fmt: skip


def test_nothing_is_sent_before_the_first_list_then_the_list_even_empty() -> None:
    worker, bus, inbox = watcher()
    assert bus.sent == []
    deliver(worker, inbox, listed([]))
    assert sets(bus) == [[]]  # the parent learns the api source has spoken


def test_status_only_changes_are_not_sent() -> None:
    worker, bus, inbox = watcher()
    deliver(worker, inbox, listed([api_pod("a")]))
    deliver(worker, inbox, changed("MODIFIED", api_pod("a", rv="2", phase="Running")))
    assert sets(bus) == [["a"]]  # the echo of our own status write sends nothing


def test_spec_metadata_and_deletion_changes_are_sent() -> None:
    worker, bus, inbox = watcher()
    deliver(worker, inbox, listed([api_pod("a")]))
    deleted = api_pod("a", rv="3", deletionTimestamp="2026-01-01T00:00:00Z")
    deliver(worker, inbox, changed("MODIFIED", deleted))
    deliver(worker, inbox, changed("ADDED", api_pod("b")), changed("DELETED", api_pod("a")))
    assert sets(bus) == [["a"], ["a"], ["b"]]
    assert source_sets(bus)[1].pods[0]["metadata"]["deletionTimestamp"]


def test_mirror_pods_are_left_out() -> None:
    worker, bus, inbox = watcher()
    mirror = api_pod("m", annotations={"kubernetes.io/config.mirror": "abc"})
    deliver(worker, inbox, listed([mirror, api_pod("a")]))
    assert sets(bus) == [["a"]]


def test_a_relist_replaces_the_set_and_a_snapshot_resends_it() -> None:
    worker, bus, inbox = watcher()
    deliver(worker, inbox, listed([api_pod("a"), api_pod("b")]))
    deliver(worker, inbox, listed([api_pod("b")]))
    worker.on_snapshot(Snapshot(5, [], {}))  # a restarted parent may have lost it
    assert sets(bus) == [["a", "b"], ["b"], ["b"]]


def test_the_parent_sees_no_resource_version_and_only_a_terminal_phase() -> None:
    running = source_view(api_pod("a", phase="Running"))
    assert "resourceVersion" not in running["metadata"] and "status" not in running
    assert "managedFields" not in running["metadata"]
    assert source_view(api_pod("a", phase="Succeeded"))["status"] == {"phase": "Succeeded"}


def test_a_failing_watch_keeps_the_set_and_is_logged_once_per_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    worker, bus, inbox = watcher()
    deliver(worker, inbox, listed([api_pod("a")]))
    refused = ConnectionRefusedError("connection refused")
    deliver(worker, inbox, Broken(REFLECTOR, refused), Broken(REFLECTOR, refused))
    assert sets(bus) == [["a"]]  # nothing is taken away while the API is unreachable
    failures = [r for r in caplog.records if "pod watch failed" in r.message]
    assert len(failures) == 1
    deliver(worker, inbox, changed("ADDED", api_pod("b")))
    assert sets(bus) == [["a"], ["a", "b"]]
    assert any("pod watch resumed" in r.message for r in caplog.records)


def test_the_status_manager_gets_the_whole_view_then_what_changed() -> None:
    worker, bus, inbox = watcher()
    mirror = api_pod("m", annotations={"kubernetes.io/config.mirror": "abc", "other": "x"})
    deliver(worker, inbox, listed([mirror, api_pod("a")]))
    deliver(worker, inbox, changed("MODIFIED", api_pod("a", rv="2", phase="Running")))
    deliver(worker, inbox, changed("MODIFIED", api_pod("a", rv="3", phase="Running", x="y")))
    deliver(worker, inbox, changed("DELETED", mirror))
    assert observed(bus) == [
        (True, ["m@1", "a@1"], []),
        (False, ["a@2"], []),  # someone's status write (or the echo of ours)
        (False, [], ["m"]),  # a label or the like: nothing the status manager compares
    ]
    whole = next(m for m in bus.sent if isinstance(m, ApiPodsObserved))
    assert whole.pods[0] == {
        "metadata": {
            "uid": "m",
            "namespace": "default",
            "name": "p-m",
            "resourceVersion": "1",
            "annotations": {"kubernetes.io/config.mirror": "abc"},
        },
        "status": {"phase": "Pending", "podIP": "10.0.0.9"},
    }
    worker.on_snapshot(Snapshot(5, [], {}))  # the parent may have lost it: all again
    assert observed(bus)[-1] == (True, ["a@3"], [])


def test_the_view_goes_before_the_pods_it_belongs_to() -> None:
    """The status manager hears the API's view of a new pod before the parent's status of
    it, so it writes only what the API lacks."""
    worker, bus, inbox = watcher()
    deliver(worker, inbox, listed([]))
    deliver(worker, inbox, changed("ADDED", api_pod("a")))
    kinds = [m.kind for m in bus.sent]
    assert kinds == ["ApiPodsObserved", "PodsListed", "ApiPodsObserved", "PodsListed"]
