"""The event recorder: what ``pkletd status`` shows of events, while pod workers record."""

from __future__ import annotations

import threading

from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason

from tests.supervisor.pods.unit_helpers import make_pod

WEB = ObjectRef.of(make_pod("app"))


def test_recent_events_read_while_pod_workers_record() -> None:
    recorder = EventRecorder(keep=50)
    done = threading.Event()

    def record() -> None:
        while not done.is_set():
            recorder.normal(WEB, Reason.PULLED, "already present")

    writers = [threading.Thread(target=record) for _ in range(2)]
    for writer in writers:
        writer.start()
    try:
        for _ in range(300):
            events = recorder.recent()  # the deque turns over all the while
            assert all(e["reason"] == "Pulled" for e in events)
    finally:
        done.set()
        for writer in writers:
            writer.join()
    assert len(recorder.recent()) == 50


def test_events_name_their_object_as_the_api_does() -> None:
    recorder = EventRecorder()
    pod = make_pod("app", initContainers=[{"name": "setup", "image": "busybox"}])
    recorder.normal(ObjectRef.of(pod, "setup"), Reason.PULLING, 'Pulling image "busybox"')
    recorder.warning(ObjectRef.node("node-1"), Reason.FAILED, "something")
    first, second = recorder.take_new()
    assert first.api()["involvedObject"] == {
        "kind": "Pod",
        "namespace": "default",
        "name": "web",
        "uid": pod.uid,
        "apiVersion": "v1",
        "fieldPath": "spec.initContainers{setup}",
    }
    assert second.api()["involvedObject"] == {
        "kind": "Node",
        "name": "node-1",
        "uid": "node-1",
        "apiVersion": "v1",
    }
    assert recorder.take_new() == []  # taken once
    assert [e["object"] for e in recorder.recent()] == ["default/web", "node-1"]
