"""The status manager without an API server: its pure parts, and the worker on FakeCalls
with its calls run inline and a fake clock (no threads, no sleeps)."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from pkletd.ipc.bus.messages import (
    ApiPodsObserved,
    EventRecorded,
    PodDeleted,
    PodForgotten,
    PodStatusUpdated,
    PodTerminated,
    Snapshot,
)
from pkletd.workers.apiwatcher import api_view
from pkletd.workers.statusmanager import mirrors, podstatus
from pkletd.workers.statusmanager.events import (
    COMBINED,
    BadEvent,
    Correlated,
    Correlator,
    EventQueue,
    Namer,
    make_event,
)
from pkletd.workers.statusmanager.mirrors import ABSENT, UNKNOWN, Action, Seen, SeenKind

from tests.workers.statusmanager.statusmanager_helpers import (
    NODE,
    STAMP,
    T0,
    Rig,
    api_pod,
    condition,
    event,
    reported,
    scheduled,
    static_pod,
    status,
)


def unreachable() -> Exception:
    return urllib3.exceptions.MaxRetryError(None, "/api", "Connection refused")  # type: ignore[arg-type]


@pytest.fixture
def rig() -> Iterator[Rig]:
    made = Rig()
    yield made
    made.close()


# --- what is written of a status ----------------------------------------------------------


def test_only_the_kubelets_conditions_are_sent_and_qos_is_left_to_the_api() -> None:
    mine = podstatus.owned(status(), with_scheduled=False)
    kinds = [c["type"] for c in mine["conditions"]]
    assert kinds == ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"]
    assert "qosClass" not in mine
    with_scheduled = podstatus.owned(status(), with_scheduled=True)
    assert [c["type"] for c in with_scheduled["conditions"]][-1] == "PodScheduled"


def test_patch_carries_the_uid_and_replaces_the_ip_lists() -> None:
    body = podstatus.patch("uid-1", podstatus.owned(status(ip="10.0.0.9"), False))
    assert body["metadata"] == {"uid": "uid-1"}
    assert body["status"]["podIPs"] == [{"ip": "10.0.0.9"}, {"$patch": "replace"}]
    assert "$patch" not in str(body["status"]["conditions"])


def test_covers_reads_empty_as_absent_and_conditions_by_type() -> None:
    want = podstatus.owned(status(), False)
    have = copy.deepcopy(want)
    have["conditions"] = [condition("DisruptionTarget"), *reversed(have["conditions"])]
    for c in have["conditions"]:
        c.pop("lastProbeTime")  # the API omits a null
    have["containerStatuses"][0].pop("lastState")  # and an empty map
    assert podstatus.status_covers(have, want)
    have["conditions"][1]["status"] = "False"
    assert not podstatus.status_covers(have, want)
    assert not podstatus.status_covers(None, want)
    moved = podstatus.owned(status(ip="10.0.0.9"), False)
    assert not podstatus.status_covers(want, moved)


# --- mirror pods: what to do, what to create ---------------------------------------------


@pytest.mark.parametrize(
    ("found", "want", "forgotten", "expected"),
    [
        (UNKNOWN, "h1", (), Action.READ),
        (ABSENT, "h1", (), Action.CREATE),
        (ABSENT, None, ("h1",), Action.NONE),
        (Seen(SeenKind.MIRROR, "m1", "h1"), "h1", (), Action.NONE),
        (Seen(SeenKind.MIRROR, "m1", "h0"), "h1", (), Action.DELETE),
        (Seen(SeenKind.MIRROR, "m1", "h1", deleting=True), "h1", (), Action.DELETE),
        (Seen(SeenKind.MIRROR, "m1", "h1"), None, ("h1",), Action.DELETE),
        (Seen(SeenKind.MIRROR, "m1", "h9"), None, ("h1",), Action.NONE),
        (Seen(SeenKind.OTHER, "p1"), "h1", (), Action.NONE),
    ],
)
def test_mirror_action(
    found: Seen, want: str | None, forgotten: tuple[str, ...], expected: Action
) -> None:
    assert mirrors.action(found, want, frozenset(forgotten)) is expected


def test_mirror_pod_is_the_static_pod_owned_by_the_node() -> None:
    body = mirrors.mirror_pod(static_pod(content_hash="h1"), NODE, "node-uid")
    meta = body["metadata"]
    assert (meta["name"], meta["namespace"]) == (f"etcd-{NODE}", "kube-system")
    assert meta["labels"] == {"component": "etcd"}
    assert meta["annotations"]["kubernetes.io/config.mirror"] == "h1"
    assert meta["annotations"]["kubernetes.io/config.source"] == "file"
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "node-uid", "controller": True}
    ]
    assert "uid" not in meta and "status" not in body
    assert body["spec"]["nodeName"] == NODE
    assert body["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"


# --- events: built, correlated, queued --------------------------------------------------


def test_event_is_built_as_client_go_makes_it() -> None:
    namer = Namer()
    first = make_event(event(), NODE, namer)
    assert first["source"] == {"component": "kubelet", "host": NODE}
    assert (first["reportingComponent"], first["reportingInstance"]) == ("kubelet", NODE)
    assert first["firstTimestamp"] == first["lastTimestamp"] == "2027-01-15T08:00:00Z"
    assert first["count"] == 1 and first["metadata"]["namespace"] == "default"
    assert first["metadata"]["name"] == f"web.{int(T0 * 1e9):x}"
    second = make_event(event(), NODE, namer)  # at the same instant: still its own name
    assert second["metadata"]["name"] != first["metadata"]["name"]
    node_event = event(name=NODE)
    node_event["involvedObject"].update(kind="Node", namespace="")
    assert make_event(node_event, NODE, namer)["metadata"]["namespace"] == "default"


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [("type", "Info", "type"), ("reason", 3, "reason"), ("involvedObject", None, "involvedObject")],
)
def test_a_bad_event_names_its_field(field: str, value: object, named: str) -> None:
    body = event()
    body[field] = value
    with pytest.raises(BadEvent, match=named):
        make_event(body, NODE, Namer())


def test_a_repeated_event_is_a_patch_of_the_first_with_its_count() -> None:
    namer = Namer()
    correlator = Correlator(namer)
    first = correlator.correlate(make_event(event(), NODE, namer), T0)
    assert first is not None and first.patch is None
    for count in (2, 3):
        again = correlator.correlate(make_event(event(when=T0 + count), NODE, namer), T0 + count)
        assert again is not None
        assert again.event["metadata"]["name"] == first.event["metadata"]["name"]
        assert again.patch == {
            "count": count,
            "lastTimestamp": again.event["lastTimestamp"],
            "message": "Started container app",
        }
        assert again.event["firstTimestamp"] == first.event["firstTimestamp"]


def test_the_tenth_different_message_is_combined() -> None:
    namer = Namer()
    correlator = Correlator(namer)
    written = []
    for i in range(12):
        body = event(reason="BackOff", message=f"Back-off {i}", kind="Warning")
        write = correlator.correlate(make_event(body, NODE, namer), T0 + i)
        assert write is not None
        written.append(write)
    assert all(not w.event["message"].startswith(COMBINED) for w in written[:9])
    combined = written[9:]
    assert combined[0].event["message"] == COMBINED + "Back-off 9"
    assert combined[0].patch is None
    assert combined[1].patch is not None and combined[1].patch["count"] == 2
    names = {w.event["metadata"]["name"] for w in combined}
    assert len(names) == 1


def test_spam_filter_allows_25_per_object_then_one_per_5_minutes() -> None:
    namer = Namer()
    correlator = Correlator(namer)

    def record(at: float, name: str = "web") -> Correlated | None:
        return correlator.correlate(make_event(event(when=at, name=name), NODE, namer), at)

    accepted = [record(T0 + i / 100) for i in range(40)]
    assert sum(a is not None for a in accepted) == 25
    assert record(T0 + 1, name="other") is not None  # another object has its own bucket
    assert record(T0 + 299) is None
    late = record(T0 + 301)
    assert late is not None and late.patch is not None
    assert late.patch["count"] == 42  # the dropped ones were counted, as client-go does


def test_a_write_that_ends_late_does_not_lower_the_count() -> None:
    namer = Namer()
    correlator = Correlator(namer)
    first = correlator.correlate(make_event(event(), NODE, namer), T0)
    second = correlator.correlate(make_event(event(when=T0 + 1), NODE, namer), T0 + 1)
    assert first is not None and second is not None and second.patch is not None
    correlator.update_state(
        {**first.event, "metadata": {**first.event["metadata"], "resourceVersion": "7"}}
    )
    third = correlator.correlate(make_event(event(when=T0 + 2), NODE, namer), T0 + 2)
    assert third is not None and third.patch is not None and third.patch["count"] == 3


def test_queue_merges_writes_of_one_event_and_drops_the_oldest() -> None:
    namer = Namer()
    correlator = Correlator(namer)
    queue = EventQueue(limit=3)
    for i in range(4):
        write = correlator.correlate(make_event(event(when=T0 + i), NODE, namer), T0 + i)
        assert write is not None
        queue.add(write)
    assert len(queue) == 1
    only = queue.pop()
    assert only is not None and only.patch is None and only.event["count"] == 4
    for i in range(5):
        write = correlator.correlate(make_event(event(name=f"p{i}"), NODE, namer), T0)
        assert write is not None
        queue.add(write)
    assert len(queue) == 3 and queue.dropped == 2
    head = queue.pop()
    assert head is not None and head.event["involvedObject"]["name"] == "p2"
    queue.put_back(head)
    again = queue.pop()
    assert again is not None and again.event["involvedObject"]["name"] == "p2"


# --- the worker on FakeCalls -------------------------------------------------------------


def test_a_status_is_written_once_and_not_again_while_unchanged(rig: Rig) -> None:
    pod = rig.calls.add_pod(scheduled(api_pod()))
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.settle()
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    rig.settle()
    assert rig.calls.count("patch") == 1
    api_status = rig.calls.pods[("default", "web")]["status"]
    assert api_status["phase"] == "Running"
    times = {c["type"]: c["lastTransitionTime"] for c in api_status["conditions"]}
    assert times["PodScheduled"] == "2025-06-01T12:00:00Z"  # the scheduler's, kept
    assert times["Ready"] == STAMP
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    for _ in range(3):
        rig.advance(10.0)  # the watch shows the API as written
    assert rig.calls.count("patch") == 1
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod, ready=False)))
    rig.settle()
    assert rig.calls.count("patch") == 2


def test_a_restarted_worker_compares_with_the_snapshot_and_writes_only_what_differs() -> None:
    first = Rig()
    calls = first.calls
    pods = [calls.add_pod(api_pod(f"p{i}")) for i in range(3)]
    first.worker.on_snapshot(Snapshot(0, [reported(p) for p in pods], {}))
    first.settle()
    assert calls.count("patch") == 3
    first.close()
    calls.pods[("default", "p1")]["status"]["phase"] = "Pending"  # someone else wrote
    calls.bump(calls.pods[("default", "p1")])
    again = Rig(calls, watched=False)  # no watch: what the parent's snapshot says
    held = [api_view(p) for p in calls.pods.values()]
    again.worker.on_snapshot(Snapshot(7, [reported(p) for p in pods], {}, api_pods=held))
    again.settle()
    assert calls.count("patch") == 3  # the API's set not listed yet: nothing written
    again.worker.on_snapshot(
        Snapshot(8, [reported(p) for p in pods], {}, api_pods=held, api_listed=True)
    )
    again.settle()
    assert calls.calls[-1] == ("patch", "default/p1")
    assert calls.count("patch") == 4
    assert calls.pods[("default", "p1")]["status"]["phase"] == "Running"
    again.close()


def test_a_status_changed_behind_our_back_is_repaired_without_a_list(rig: Rig) -> None:
    pod = rig.calls.add_pod(scheduled(api_pod()))
    rig.worker.on_snapshot(Snapshot(0, [reported(pod)], {}))
    rig.settle()
    assert rig.calls.count("patch") == 1
    api_status = rig.calls.pods[("default", "web")]["status"]
    api_status["phase"] = "Unknown"  # another client's write, seen by the watch
    api_status["conditions"] = [c for c in api_status["conditions"] if c["type"] != "Ready"]
    rig.settle()
    repaired = rig.calls.pods[("default", "web")]["status"]
    assert repaired["phase"] == "Running"
    assert "Ready" in [c["type"] for c in repaired["conditions"]]
    assert [v for v, _ in rig.calls.calls] == ["patch", "patch"]  # no list, no read


def test_an_old_view_arriving_late_changes_nothing(rig: Rig) -> None:
    """The watch's echo of a write may come after a newer write of ours: by its
    resourceVersion it is older than what the worker knows, and nothing is written."""
    pod = rig.calls.add_pod(scheduled(api_pod()))
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.settle()
    rig.watched = False
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod, ready=False)))
    rig.settle()
    echo = api_view(rig.calls.pods[("default", "web")])
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    rig.settle()
    assert rig.calls.count("patch") == 2
    rig.worker.on_broadcast(ApiPodsObserved([echo]))  # says Ready False: older
    rig.settle()
    assert rig.calls.count("patch") == 2


def test_a_pod_bound_without_the_scheduler_gets_the_kubelets_pod_scheduled(rig: Rig) -> None:
    pod = rig.calls.add_pod(api_pod())  # created with nodeName: no PodScheduled
    rig.worker.on_snapshot(Snapshot(0, [reported(pod)], {}))
    rig.settle()
    assert rig.calls.count("patch") == 1  # the watch showed it missing
    kinds = [c["type"] for c in rig.calls.pods[("default", "web")]["status"]["conditions"]]
    assert "PodScheduled" in kinds
    rig.advance(10.0)
    assert rig.calls.count("patch") == 1


def test_a_pod_recreated_under_its_name_is_left_alone(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    old = rig.calls.add_pod(api_pod())
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.settle()
    del rig.calls.pods[("default", "web")]
    rig.calls.add_pod(api_pod())  # same name, new UID
    for ready in (True, False):
        rig.worker.on_broadcast(PodStatusUpdated(reported(old, ready=ready)))
        rig.advance(10.0)
    assert rig.calls.count("patch") == 1  # refused once (409), never tried again
    assert "status" not in rig.calls.pods[("default", "web")]
    assert caplog.text.count("pod recreated under its name") == 1


def test_failed_writes_back_off_and_all_go_when_the_server_answers(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    pods = [rig.calls.add_pod(api_pod(f"p{i}")) for i in range(2)]
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.settle()
    rig.calls.fail("*", unreachable)
    for pod in pods:
        rig.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    rig.settle()
    start = rig.clock.mono
    tried = []
    while rig.clock.mono < start + 61:
        rig.clock.step_to(rig.next_due)
        before = rig.calls.count("patch")
        rig.settle()
        if rig.calls.count("patch") > before:
            assert rig.calls.count("patch") == before + 2  # both pods, each on its back-off
            tried.append(rig.clock.mono - start)
    assert tried == [1, 3, 7, 15, 31, 61]  # 1 s doubling, at most 30 s
    rig.calls.fail("*", None)
    patches = rig.calls.count("patch")
    rig.clock.step_to(rig.next_due)
    assert rig.clock.mono - start == 91  # the next retry
    rig.settle()
    assert rig.calls.count("patch") == patches + 2
    assert all(p["status"]["phase"] == "Running" for p in rig.calls.pods.values())
    assert caplog.text.count("API call failed call=patch pod status") == 1
    assert caplog.text.count("API server reachable again") == 1


def test_a_refused_status_is_not_sent_again_until_it_changes(rig: Rig) -> None:
    pod = rig.calls.add_pod(scheduled(api_pod()))
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.calls.fail("patch", lambda: ApiException(status=422, reason="Invalid"))
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    for _ in range(3):
        rig.advance(10.0)
    assert rig.calls.count("patch") == 1
    rig.calls.fail("patch", None)
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod, ready=False)))
    rig.settle()
    assert rig.calls.count("patch") == 2


def test_final_delete_follows_the_last_status_and_is_reported(rig: Rig) -> None:
    pod = rig.calls.add_pod(api_pod())
    uid = pod["metadata"]["uid"]
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.settle()
    rig.calls.fail("patch", unreachable)
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod, phase="Succeeded")))
    rig.worker.on_broadcast(PodForgotten(uid))
    rig.worker.on_broadcast(PodTerminated(uid, "default", "web"))
    rig.settle()
    assert rig.calls.count("delete") == 0  # the final status first
    rig.calls.fail("patch", None)
    rig.advance(1.0)
    assert [v for v, _ in rig.calls.calls[-2:]] == ["patch", "delete"]
    assert rig.bus.sent == [PodDeleted(uid)]


@pytest.mark.parametrize("status_code", [404, 409])
def test_a_pod_gone_or_replaced_counts_as_deleted(rig: Rig, status_code: int) -> None:
    rig.worker.on_snapshot(
        Snapshot(0, [], {}, terminated=[{"uid": "u1", "namespace": "default", "name": "web"}])
    )
    rig.calls.fail("delete", lambda: ApiException(status=status_code))
    rig.settle()
    assert rig.bus.sent == [PodDeleted("u1")]


def test_a_failed_delete_is_retried(rig: Rig) -> None:
    pod = rig.calls.add_pod(api_pod())
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.calls.fail("delete", lambda: ApiException(status=500))
    rig.worker.on_broadcast(PodTerminated(pod["metadata"]["uid"], "default", "web"))
    rig.settle()
    assert rig.bus.sent == []
    rig.calls.fail("delete", None)
    rig.advance(1.0)
    assert rig.bus.sent == [PodDeleted(pod["metadata"]["uid"])]
    assert ("default", "web") not in rig.calls.pods


def test_mirror_pod_replaced_when_the_static_pod_changes(rig: Rig) -> None:
    rig.worker.on_snapshot(Snapshot(0, [static_pod(content_hash="h1")], {}))
    rig.settle()
    mirror = rig.calls.pods[("kube-system", f"etcd-{NODE}")]
    assert mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] == "h1"
    assert mirror["status"]["phase"] == "Running"
    assert [c["type"] for c in mirror["status"]["conditions"]][-1] == "PodScheduled"
    rig.worker.on_broadcast(PodStatusUpdated(static_pod(content_hash="h2")))
    rig.worker.on_broadcast(PodForgotten("h1"))
    rig.settle()
    replaced = rig.calls.pods[("kube-system", f"etcd-{NODE}")]
    assert replaced["metadata"]["annotations"]["kubernetes.io/config.mirror"] == "h2"
    assert replaced["metadata"]["uid"] != mirror["metadata"]["uid"]
    assert replaced["status"]["phase"] == "Running"
    assert rig.calls.count("read-node") == 1


def test_a_pod_that_is_no_mirror_is_left_alone(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    squatter = api_pod(f"etcd-{NODE}", namespace="kube-system")
    rig.calls.add_pod(squatter)
    rig.worker.on_snapshot(Snapshot(0, [static_pod()], {}))
    for _ in range(3):
        rig.advance(10.0)
    assert rig.calls.calls == []
    assert caplog.text.count("not a mirror pod") == 1


def test_a_static_pod_after_the_first_list_gets_its_mirror_at_once(rig: Rig) -> None:
    """The watch shows no pod at its name: created at once. Found by the soak: the mirror
    pod (and its status) waited for the next periodic list, a minute by default."""
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.settle()
    rig.worker.on_broadcast(PodStatusUpdated(static_pod()))
    rig.settle()
    assert ("kube-system", f"etcd-{NODE}") in rig.calls.pods
    assert [v for v, _ in rig.calls.calls] == ["read-node", "create", "patch"]


def test_a_mirror_pod_in_doubt_is_read(rig: Rig) -> None:
    """A status write finds the mirror pod gone before the watch says so: it is read (the
    node may read only pods bound to it, and a pod that does not exist is 403 to it,
    never 404: no pod of ours), then made again."""
    rig.worker.on_snapshot(Snapshot(0, [static_pod()], {}))
    rig.settle()
    rig.watched = False
    del rig.calls.pods[("kube-system", f"etcd-{NODE}")]  # the watch has not told yet
    rig.worker.on_broadcast(PodStatusUpdated(static_pod(name="etcd")))
    changed = static_pod()
    changed["status"]["phase"] = "Pending"
    rig.worker.on_broadcast(PodStatusUpdated(changed))
    rig.settle()
    verbs = [v for v, _ in rig.calls.calls]
    assert verbs[-4:] == ["patch", "read", "create", "patch"]
    assert rig.calls.pods[("kube-system", f"etcd-{NODE}")]["status"]["phase"] == "Pending"


def test_a_deleted_mirror_pod_is_made_again_at_once(rig: Rig) -> None:
    """The watch shows the mirror pod deleted: it is recreated, with no list or read."""
    rig.worker.on_snapshot(Snapshot(0, [static_pod()], {}))
    rig.settle()
    first = rig.calls.pods.pop(("kube-system", f"etcd-{NODE}"))
    rig.settle()
    again = rig.calls.pods[("kube-system", f"etcd-{NODE}")]
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert again["status"]["phase"] == "Running"
    assert [v for v, _ in rig.calls.calls] == ["read-node", "create", "patch", "create", "patch"]


def test_a_name_held_by_a_pod_bound_elsewhere_is_tried_less_and_less_often(rig: Rig) -> None:
    squatter = api_pod(f"etcd-{NODE}", namespace="kube-system")
    squatter["spec"]["nodeName"] = "node-b"  # not ours: the node may not even read it
    rig.calls.add_pod(squatter)
    rig.worker.on_snapshot(Snapshot(0, [static_pod()], {}))
    for _ in range(120):
        rig.advance(1.0)
    assert rig.calls.pods[("kube-system", f"etcd-{NODE}")]["spec"]["nodeName"] == "node-b"
    assert 5 <= rig.calls.count("create") <= 10  # 1 s doubling to 30 s, not every turn


def test_events_wait_while_the_server_is_down_then_go_merged(rig: Rig) -> None:
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.settle()
    rig.calls.fail("*", unreachable)
    for i in range(5):
        rig.worker.on_broadcast(EventRecorded(event(when=T0 + i)))
    rig.worker.on_broadcast(EventRecorded(event(reason="Pulled", message="pulled")))
    rig.settle()
    rig.calls.fail("*", None)
    rig.advance(10.0)
    posted = sorted((e["reason"], e["count"]) for e in rig.calls.events.values())
    assert posted == [("Pulled", 1), ("Started", 5)]


def test_the_event_queue_is_bounded() -> None:
    rig = Rig(event_queue_limit=3)
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.calls.fail("*", unreachable)
    for i in range(6):
        rig.worker.on_broadcast(EventRecorded(event(name=f"p{i}")))
    rig.settle()
    rig.calls.fail("*", None)
    rig.advance(10.0)
    posted = sorted(e["involvedObject"]["name"] for e in rig.calls.events.values())
    assert posted == ["p3", "p4", "p5"]  # the oldest were dropped
    rig.close()


def test_bad_input_is_dropped_and_the_rest_goes_on(rig: Rig) -> None:
    pod = rig.calls.add_pod(api_pod())
    broken = event()
    del broken["reason"]
    rig.worker.on_snapshot(
        Snapshot(0, [{"metadata": {"name": "no-uid"}}], {}, terminated=[{"uid": "x"}])
    )
    rig.worker.on_broadcast(EventRecorded(broken))
    rig.worker.on_broadcast(PodStatusUpdated({"status": {}}))
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    rig.settle()
    assert rig.calls.pods[("default", "web")]["status"]["phase"] == "Running"


def test_a_mirror_pod_missing_from_a_new_whole_set_is_made_again(rig: Rig) -> None:
    """Deleted while no one watched (the api-watcher restarted): the next whole set,
    which lacks it, is enough."""
    rig.worker.on_snapshot(Snapshot(0, [static_pod()], {}))
    rig.settle()
    rig.watched = False
    rig.calls.pods.pop(("kube-system", f"etcd-{NODE}"))
    rig.worker.on_broadcast(ApiPodsObserved([], whole=True))
    rig.settle()
    assert ("kube-system", f"etcd-{NODE}") in rig.calls.pods
    assert [v for v, _ in rig.calls.calls][-2:] == ["create", "patch"]
