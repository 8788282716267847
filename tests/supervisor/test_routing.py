"""The parent's routing table: each message a worker may send reaches its handler from the
workers allowed to send it, and from no other (dropped, with one log line naming the worker
and the kind); a message the parent has no row for, or from a stale identity, is dropped."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.apimodel.probespec import ProbeType
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus import messages as m
from pkletd.ipc.bus.codec import Envelope
from pkletd.ipc.bus.workername import WorkerName
from pkletd.ipc.clock import FakeClock
from pkletd.supervisor.children import Children
from pkletd.supervisor.routing import Received, Router, routes

EVERY = frozenset(WorkerName)
UID = PodUID("uid-1")


def only(name: WorkerName) -> frozenset[WorkerName]:
    return frozenset({name})


# a message, the workers that may send it, the handler it reaches
CASES: list[tuple[m.Message, frozenset[WorkerName], str]] = [
    (m.Hello("pleg", 11), EVERY, "snapshot_wanted"),
    (m.SnapshotRequest("pleg"), EVERY, "snapshot_wanted"),
    (m.WorkerReady("pleg"), EVERY, "worker_ready"),
    (m.Heartbeat("pleg"), EVERY, "heartbeat"),
    (m.PodsListed(PodSource.FILE, []), only(WorkerName.FILE_SOURCE), "pods_listed"),
    (m.PodsListed(PodSource.HTTP, []), only(WorkerName.HTTP_SOURCE), "pods_listed"),
    (m.PodsListed(PodSource.API, []), only(WorkerName.API_WATCHER), "pods_listed"),
    (m.ApiPodsObserved([]), only(WorkerName.API_WATCHER), "api_pods_observed"),
    (
        m.ManifestRejected(PodSource.FILE, "/m/a.yaml", "bad"),
        only(WorkerName.FILE_SOURCE),
        "manifest_rejected",
    ),
    (
        m.ManifestRejected(PodSource.HTTP, "http://h/p", "bad"),
        only(WorkerName.HTTP_SOURCE),
        "manifest_rejected",
    ),
    (
        m.ManifestAccepted(PodSource.FILE, "/m/a.yaml"),
        only(WorkerName.FILE_SOURCE),
        "manifest_accepted",
    ),
    (
        m.ManifestAccepted(PodSource.HTTP, "http://h/p"),
        only(WorkerName.HTTP_SOURCE),
        "manifest_accepted",
    ),
    (
        m.PodLifecycleEvent(UID, m.LifecycleEventType.CONTAINER_DIED, "c1"),
        only(WorkerName.PLEG),
        "lifecycle_event",
    ),
    (m.RelistCompleted(0.01, 3), only(WorkerName.PLEG), "relist_completed"),
    (m.PlegModeChanged(m.PlegMode.EVENTED), only(WorkerName.PLEG), "pleg_mode_changed"),
    (
        m.ProbeResult(UID, "app", "c1", ProbeType.LIVENESS, m.ProbeVerdict.FAILURE, 0, 3, "no"),
        only(WorkerName.PROBER),
        "probe_result",
    ),
    (m.ProbeMetrics([]), only(WorkerName.PROBER), "probe_metrics"),
    (m.NodeReported(True, 1.0, 1.0, ""), only(WorkerName.NODE_LEASE), "node_reported"),
    (m.PodDeleted(UID), only(WorkerName.STATUS_MANAGER), "pod_deleted"),
    (
        m.ObjectFetched(ObjectKind.SECRET, "default", "s"),
        only(WorkerName.POD_OBJECTS),
        "object_fetched",
    ),
    (m.TokenIssued(UID, "default", "", 3600), only(WorkerName.POD_OBJECTS), "token_issued"),
    (m.ServicesListed("default", []), only(WorkerName.POD_OBJECTS), "services_listed"),
    (
        m.RuntimeClassesListed({"runc-test": "runc-test"}),
        only(WorkerName.POD_OBJECTS),
        "runtime_classes_listed",
    ),
    (m.GarbageFound(m.GarbageKind.IMAGES), only(WorkerName.IMAGE_GC), "garbage_found"),
    (m.ReclaimRequested("DiskPressure"), only(WorkerName.EVICTION), "reclaim_requested"),
    (m.SignalsObserved([], [], [], {}), only(WorkerName.EVICTION), "signals_observed"),
    (
        m.EvictionThresholdMet("memory.available", "memory", False),
        only(WorkerName.EVICTION),
        "eviction_threshold_met",
    ),
    (
        m.EvictionNeeded("memory.available", "memory", True, "100Mi", "50Mi", []),
        only(WorkerName.EVICTION),
        "eviction_needed",
    ),
    (m.NodeShutdownStarted(), only(WorkerName.NODE_SHUTDOWN), "node_shutdown"),
    (m.NodeShutdownCancelled(), only(WorkerName.NODE_SHUTDOWN), "node_shutdown"),
    (m.InhibitorReported(True, 30.0), only(WorkerName.NODE_SHUTDOWN), "inhibitor_reported"),
    (
        m.ClientCertificateReported("/pki/kubelet-client-x.pem", 1.0),
        only(WorkerName.CERT_MANAGER),
        "client_certificate_reported",
    ),
    (
        m.CsiDriverRegistered("hostpath.csi.k8s.io", "/p/csi.sock", "n1", 0, {}, ["1.0.0"]),
        only(WorkerName.PLUGIN_WATCHER),
        "csi_driver_registered",
    ),
    (m.CsiDriverGone("hostpath.csi.k8s.io"), only(WorkerName.PLUGIN_WATCHER), "csi_driver_gone"),
    (m.CsiDriversListed([]), only(WorkerName.PLUGIN_WATCHER), "csi_drivers_listed"),
]
IDS = [f"{type(message).__name__}-{i}" for i, (message, _, _) in enumerate(CASES)]
# the messages some worker may not send
RESTRICTED = [(message, allowed) for message, allowed, _ in CASES if allowed != EVERY]
RESTRICTED_IDS = [i for i, (_, allowed, _) in zip(IDS, CASES, strict=True) if allowed != EVERY]


class Spawner:
    def spawn(self, name: WorkerName) -> None:
        pass

    def signal(self, pid: int, sig: int) -> None:
        pass


class Handlers:
    """Every handler of ``routing.Handlers``, recording what reached it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Received[Any]]] = []

    def __getattr__(self, handler: str) -> Any:
        return lambda got: self.calls.append((handler, got))


class Parent:
    """The router over every worker running (worker ``i`` with pid ``100 + i``)."""

    def __init__(self) -> None:
        self.clock = FakeClock(mono=1.0)
        self.children = Children(list(WorkerName), Spawner(), 10.0, clock=self.clock)
        self.children.start_all()
        for i, name in enumerate(WorkerName):
            self.children.spawned(name, 100 + i)
        self.handlers = Handlers()
        self.router = Router(routes(self.handlers), self.children)

    def send(self, worker: WorkerName, message: m.Message, identity: bytes = b"") -> None:
        """``message`` from ``worker``, at a later time (heartbeats show it)."""
        self.clock.step(1.0)
        pid = self.children.workers[worker].pid
        self.router.route(identity or f"{worker}/{pid}".encode(), Envelope(worker, 7, 5.5, message))

    def beat_at(self, worker: WorkerName) -> float:
        return self.children.workers[worker].last_heartbeat


def test_every_message_a_worker_may_send_has_a_row() -> None:
    table = routes(Handlers())
    assert set(table) == {type(message) for message, _, _ in CASES} == m.FROM_WORKERS
    assert m.FROM_WORKERS | m.FROM_PARENT == set(m.MESSAGES.values())


@pytest.mark.parametrize(("message", "allowed", "handler"), CASES, ids=IDS)
def test_an_allowed_senders_message_reaches_its_handler(
    message: m.Message, allowed: frozenset[WorkerName], handler: str
) -> None:
    for worker in sorted(allowed):
        parent = Parent()
        parent.send(worker, message)
        pid = parent.children.workers[worker].pid
        identity = f"{worker}/{pid}".encode()
        assert parent.handlers.calls == [(handler, Received(worker, pid, identity, 5.5, message))]
        assert parent.beat_at(worker) == parent.clock.mono


@pytest.mark.parametrize(("message", "allowed"), RESTRICTED, ids=RESTRICTED_IDS)
def test_a_wrong_senders_message_is_dropped_and_logged(
    message: m.Message, allowed: frozenset[WorkerName], caplog: pytest.LogCaptureFixture
) -> None:
    wrong = sorted(EVERY - allowed)
    for worker in wrong:
        parent = Parent()
        before = parent.beat_at(worker)
        with caplog.at_level(logging.ERROR, logger="pkletd.supervisor.routing"):
            caplog.clear()
            parent.send(worker, message)
        assert parent.handlers.calls == []
        assert parent.beat_at(worker) == before  # not its heartbeat either
        assert caplog.messages == [
            f"dropped message from the wrong worker worker={worker} kind={message.kind}"
        ]


def test_a_message_with_no_row_is_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    parent = Parent()
    with caplog.at_level(logging.WARNING, logger="pkletd.supervisor.routing"):
        parent.send(WorkerName.PLEG, m.ParentAlive(True))
    assert parent.handlers.calls == []
    assert caplog.messages == [
        "dropped message not meant for the parent kind=ParentAlive worker=pleg"
    ]
    assert parent.beat_at(WorkerName.PLEG) == parent.clock.mono  # it still shows the worker alive


@pytest.mark.parametrize(
    "identity",
    [b"pleg/999", b"pleg/", "pleg/\u00b2".encode(), b"nosuch/100", b"prober/100", b"\xff/100"],
)
def test_a_message_from_an_unknown_or_stale_identity_is_dropped(
    identity: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    parent = Parent()  # pleg is pid 100, prober 103; prober/100 names pleg's pid
    before = parent.beat_at(WorkerName.PLEG)
    with caplog.at_level(logging.WARNING, logger="pkletd.supervisor.routing"):
        parent.send(WorkerName.PLEG, m.Heartbeat("pleg"), identity)
    assert parent.handlers.calls == []
    assert parent.beat_at(WorkerName.PLEG) == before
    assert caplog.messages == [
        f"dropped message from unknown or stale worker identity={identity!r} kind=Heartbeat"
    ]
