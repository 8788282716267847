"""The parent's book of pods: sources, removal, and PLEG events it already knows about."""

from __future__ import annotations

import copy

from pkletd.ipc.bus.messages import LifecycleEventType, PodLifecycleEvent
from pkletd.ipc.runtime.cri import ContainerState
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.types import SyncResult

from tests.supervisor.pods.unit_helpers import UID, container, make_pod, pod_dict, runtime, sandbox


def book_with_running_pod() -> tuple[Pods, str]:
    pods = Pods("10.0.0.1", ["file"], ProbeResults())
    raw = pod_dict("app")
    pods.set_source("file", [raw])
    pod = make_pod("app")
    running = container(pod)
    pods.record(SyncResult(UID, runtime(sandbox(), running)))
    return pods, running.id


def test_pleg_event_for_a_state_the_parent_recorded_is_already_seen() -> None:
    pods, cid = book_with_running_pod()
    assert pods.already_seen(
        UID, PodLifecycleEvent(UID, LifecycleEventType.CONTAINER_STARTED, cid, "running")
    )
    assert not pods.already_seen(
        UID, PodLifecycleEvent(UID, LifecycleEventType.CONTAINER_DIED, cid, "exited")
    )
    assert pods.already_seen(
        UID, PodLifecycleEvent(UID, LifecycleEventType.SANDBOX_CHANGED, "sb0", "ready")
    )


def test_removed_pod_stays_listed_until_forgotten() -> None:
    pods, _ = book_with_running_pod()
    change = pods.set_source("file", [])
    assert [p.uid for p in change.terminate] == [UID]
    assert pods.get(UID) is None  # no source wants it
    assert [p["uid"] for p in pods.summary()] == [UID]  # still shown while it terminates
    assert pods.forget(UID)
    assert pods.summary() == []


def test_running_id_names_the_running_instance_only() -> None:
    pods, cid = book_with_running_pod()
    assert pods.running_id(UID, "app") == cid
    pod = make_pod("app")
    pods.record(SyncResult(UID, runtime(sandbox(), container(pod, state=ContainerState.EXITED))))
    assert pods.running_id(UID, "app") == ""


def test_a_source_set_that_repeats_a_pod_unchanged_keeps_it_as_parsed() -> None:
    """A source sends its whole set at every change: a pod it repeats as it was is not
    parsed again (100 API pods created one by one cost ~5000 parses), a changed one is."""
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    raw = pod_dict("app")
    pods.set_source("api", [raw])
    first = pods.get(UID)
    other = pod_dict("app")
    other["metadata"].update(name="other", uid="uid-2")
    change = pods.set_source("api", [copy.deepcopy(raw), other])
    assert pods.get(UID) is first and [p.uid for p in change.sync] == ["uid-2"]
    changed = copy.deepcopy(raw)
    changed["metadata"]["labels"] = {"new": "label"}
    change = pods.set_source("api", [changed])
    assert [p.uid for p in change.sync] == [UID]
    now = pods.get(UID)
    assert now is not None and now is not first and now.labels == {"new": "label"}
