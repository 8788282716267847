"""The event recorder: what ``pkletd status`` shows of events, while pod workers record."""

from __future__ import annotations

import threading

from pkletd.supervisor.pods.events import EventRecorder, Reason


def test_recent_events_read_while_pod_workers_record() -> None:
    recorder = EventRecorder(keep=50)
    done = threading.Event()

    def record() -> None:
        while not done.is_set():
            recorder.normal("default/web", Reason.PULLED, "already present")

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
