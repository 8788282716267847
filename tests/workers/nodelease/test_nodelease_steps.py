"""The lease keeper and the status reporter, step by step on a fake clock and a fake API."""

from __future__ import annotations

import threading

from pkletd.ipc.clock import FakeClock
from pkletd.workers.nodelease.conditions import ParentHealth
from pkletd.workers.nodelease.lease import LeaseKeeper
from pkletd.workers.nodelease.options import NodeLeaseOptions
from pkletd.workers.nodelease.outcome import Outcome, Source
from pkletd.workers.nodelease.reporter import Inputs, StatusReporter
from pkletd.workers.nodelease.runtime import RuntimeProbe
from pkletd.workers.nodelease.timing import micro_time

from tests.workers.nodelease.nodelease_helpers import (
    CNI_DOWN,
    NODE,
    READY_CONDITIONS,
    T0,
    FakeNodeApi,
    FakeRuntime,
    conditions_of,
    template,
)

STOP = threading.Event()  # never set: the steps run to completion


def keeper(api: FakeNodeApi, clock: FakeClock, outcomes: list[Outcome]) -> LeaseKeeper:
    return LeaseKeeper(api, NODE, 40, 10.0, clock, outcomes.append, jitter=0.0)


def registered(api: FakeNodeApi) -> str:
    api.nodes[NODE] = {"metadata": {"name": NODE, "uid": "node-uid"}, "status": {}}
    return "node-uid"


# --- the lease -------------------------------------------------------------------------------


def test_no_lease_before_the_node_exists() -> None:
    api, clock, outcomes = FakeNodeApi(), FakeClock(mono=0.0, wall=T0), []
    keeper(api, clock, outcomes).sync(STOP)
    assert api.calls == ["get_lease", "get_node"]
    assert api.leases == {} and outcomes == []


def test_lease_is_created_owned_by_the_node_then_renewed_without_a_read() -> None:
    api, clock, outcomes = FakeNodeApi(), FakeClock(mono=0.0, wall=T0), []
    uid = registered(api)
    lease = keeper(api, clock, outcomes)
    lease.sync(STOP)
    stored = api.leases[NODE]
    assert stored["metadata"]["namespace"] == "kube-node-lease"
    assert stored["spec"] == {
        "holderIdentity": NODE,
        "leaseDurationSeconds": 40,
        "renewTime": micro_time(T0),
    }
    assert stored["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": uid}
    ]
    assert outcomes == [Outcome(Source.LEASE, written_at=T0)]
    api.calls.clear()
    clock.step(10.0)
    lease.sync(STOP)
    assert api.calls == ["update_lease"]
    assert api.leases[NODE]["spec"]["renewTime"] == micro_time(T0 + 10)
    assert outcomes[-1] == Outcome(Source.LEASE, written_at=T0 + 10)


def test_a_known_node_uid_saves_the_read() -> None:
    api, clock, outcomes = FakeNodeApi(), FakeClock(mono=0.0, wall=T0), []
    registered(api)
    lease = keeper(api, clock, outcomes)
    lease.set_node_uid("node-uid")
    lease.sync(STOP)
    assert api.calls == ["get_lease", "create_lease"]


def test_a_conflict_reads_the_lease_again_and_retries() -> None:
    api, clock, outcomes = FakeNodeApi(), FakeClock(mono=0.0, wall=T0), []
    registered(api)
    lease = keeper(api, clock, outcomes)
    lease.sync(STOP)
    api.leases[NODE]["metadata"]["resourceVersion"] = "999"  # someone else wrote it
    api.calls.clear()
    lease.sync(STOP)
    assert api.calls == ["update_lease", "get_lease", "update_lease"]
    assert outcomes[-1].error == "" and outcomes[-1].written_at == T0


def test_failed_renewals_fall_back_to_reading_with_back_off() -> None:
    api, clock, outcomes = FakeNodeApi(), FakeClock(mono=0.0, wall=T0), []
    registered(api)
    lease = keeper(api, clock, outcomes)
    lease.sync(STOP)
    api.fail("update_lease", 500, times=5)
    api.fail("get_lease", 503, times=8)
    lease.sync(STOP)
    assert clock.waits == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7.0, 7.0]  # from 200 ms, capped at 7 s
    assert api.count("update_lease") == 6  # 5 failed, then the one after the read
    assert outcomes[-1] == Outcome(Source.LEASE, written_at=T0 + sum(clock.waits))
    assert any(o.error == "update_lease: HTTP 500" for o in outcomes)


# --- registration and status -----------------------------------------------------------------


class Rig:
    """A status reporter on fakes; ``round_after`` is what its three threads would do."""

    def __init__(self, **options: object) -> None:
        self.api, self.clock, self.outcomes = (
            FakeNodeApi(),
            FakeClock(mono=0.0, wall=T0),
            list[Outcome](),
        )
        self.runtime = FakeRuntime()
        self.probe = RuntimeProbe(self.runtime, self.clock, 5.0)
        self.inputs = Inputs(template(), ParentHealth(alive_at=0.0))
        settings = NodeLeaseOptions(update_frequency=10.0, report_frequency=60.0, **options)  # type: ignore[arg-type]
        self.status = StatusReporter(
            self.api, self.probe, self.inputs, settings, self.clock, self.outcomes.append
        )

    def round_after(self, seconds: float) -> None:
        self.clock.step(seconds)
        self.probe.check()
        self.inputs.heard_parent(self.clock.monotonic(), sync_loop_ok=True, pleg_ok=True)
        self.status.sync(STOP)


def test_registration_creates_the_node_with_its_status() -> None:
    rig = Rig()
    api, clock, outcomes = rig.api, rig.clock, rig.outcomes
    rig.status.sync(STOP)
    node = api.nodes[NODE]
    assert node["metadata"]["labels"]["tier"] == "edge"
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    assert node["status"]["capacity"]["cpu"] == "2"
    assert conditions_of(node)["Ready"]["status"] == "True"
    assert node["status"]["images"][0]["names"] == ["nginx@sha256:2", "nginx:1.25"]
    assert clock.waits == [0.1]  # the kubelet waits 100 ms before its first attempt
    uid = node["metadata"]["uid"]
    assert outcomes[:2] == [
        Outcome(Source.REGISTRATION, node_uid=uid),
        Outcome(
            Source.STATUS,
            written_at=T0 + 0.1,
            node_uid=uid,
            conditions=(
                ("MemoryPressure", "False"),
                ("DiskPressure", "False"),
                ("PIDPressure", "False"),
                ("Ready", "True"),
            ),
        ),
    ]
    # The status read right after needs no write: the Node was created with it.
    assert api.calls == ["create_node", "get_node"]


def test_registration_retries_with_back_off() -> None:
    rig = Rig()
    api, clock, outcomes = rig.api, rig.clock, rig.outcomes
    api.fail("create_node", 500, times=5)
    rig.status.sync(STOP)
    assert clock.waits == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2]
    assert NODE in api.nodes
    assert [o.error for o in outcomes[:5]] == ["create_node: HTTP 500"] * 5


def test_an_existing_node_is_adopted_not_recreated() -> None:
    rig = Rig()
    api, outcomes = rig.api, rig.outcomes
    api.nodes[NODE] = {
        "metadata": {"name": NODE, "uid": "old-uid", "labels": {"kubernetes.io/hostname": "x"}},
        "spec": {"taints": [{"key": "admin", "effect": "NoSchedule"}]},
        "status": {},
    }
    rig.status.sync(STOP)
    node = api.nodes[NODE]
    assert node["metadata"]["uid"] == "old-uid"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == NODE
    assert node["spec"]["taints"] == [{"key": "admin", "effect": "NoSchedule"}]
    assert api.count("create_node") == 1
    assert outcomes[0] == Outcome(Source.REGISTRATION, node_uid="old-uid")
    assert conditions_of(node)["Ready"]["status"] == "True"  # the first status write


def test_status_is_written_on_change_or_when_the_report_is_due() -> None:
    rig = Rig()
    api, outcomes = rig.api, rig.outcomes
    rig.status.sync(STOP)
    for _ in range(5):  # 50 s, nothing changes
        rig.round_after(10.0)
    assert api.count("patch_node_status") == 0
    rig.round_after(10.0)  # 60 s since the last write: the report is due
    assert api.count("patch_node_status") == 1
    rig.runtime.conditions = (READY_CONDITIONS[0], CNI_DOWN)
    rig.round_after(10.0)
    assert api.count("patch_node_status") == 2
    ready = conditions_of(api.nodes[NODE])["Ready"]
    assert ready["status"] == "False" and ready["message"].startswith(
        "container runtime network not ready: NetworkReady=false"
    )
    assert outcomes[-1].written_at == T0 + 0.1 + 70.0


def test_status_retries_five_times_then_reports() -> None:
    rig = Rig()
    api, outcomes, status = rig.api, rig.outcomes, rig.status
    status.sync(STOP)
    api.fail("get_node", 500, times=4)
    status.update_status()
    assert outcomes[-1].error == ""  # the fifth try got through
    api.fail("get_node", 500, times=5)
    status.update_status()
    assert outcomes[-1].error == ("update node status exceeds retry count: get_node: HTTP 500")


def test_without_register_node_the_node_is_never_created() -> None:
    rig = Rig(register_node=False)
    api, outcomes = rig.api, rig.outcomes
    rig.status.sync(STOP)
    assert api.count("create_node") == 0
    assert outcomes[-1].source is Source.STATUS
    assert outcomes[-1].error.endswith(f'nodes "{NODE}" not found')
