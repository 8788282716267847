"""Builders shared by the pod logic's unit tests: pods, what the runtime has for them,
a pod syncer on the fake runtime, and a sync loop with stand-in pod workers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.bus.messages import Message
from pkletd.ipc.runtime.cri import (
    ContainerID,
    ContainerInfo,
    ContainerState,
    SandboxID,
    SandboxInfo,
    SandboxState,
)
from pkletd.supervisor.pods import admission
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.cgroups.podcgroups import CgroupTree, PodCgroups
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.nodeinfo import DnsSettings, NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podmetrics import PodMetrics
from pkletd.supervisor.pods.podsync import PodSyncer
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.setup.podsetup import PodSetup
from pkletd.supervisor.pods.setup.runtimespec import CONTAINER_HASH
from pkletd.supervisor.pods.syncloop import Parts, SyncLoop
from pkletd.supervisor.pods.types import PodRuntime

UID = "uid-1"
SECOND = 1_000_000_000  # the CRI reports times in nanoseconds
T0 = 1_700_000_000 * SECOND
NODE = admission.Node("n", 110, {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30})


def pod_dict(*names: str, **spec: Any) -> dict[str, Any]:
    """A minimal API pod with one busybox container per name (default: "app")."""
    containers = [{"name": n, "image": "busybox:1.36", "command": ["sleep", "1d"]} for n in names]
    return {
        "metadata": {"name": "web", "namespace": "default", "uid": UID},
        "spec": {"containers": containers or [{"name": "app", "image": "busybox:1.36"}], **spec},
    }


def make_pod(*names: str, **spec: Any) -> Pod:
    return parse_pod(pod_dict(*names, **spec))


def sandbox(
    state: SandboxState = SandboxState.READY, ip: str = "10.88.0.5", attempt: int = 0
) -> SandboxInfo:
    return SandboxInfo(
        id=SandboxID(f"sb{attempt}"),
        name="web",
        namespace="default",
        uid=UID,
        attempt=attempt,
        state=state,
        created_at=T0 + attempt,
        labels={},
        annotations={},
        ip=ip,
    )


def container(
    pod: Pod,
    name: str = "app",
    state: ContainerState = ContainerState.RUNNING,
    attempt: int = 0,
    exit_code: int = 0,
    spec_hash: str | None = None,
) -> ContainerInfo:
    """An instance of ``name``; by default carrying the hash of the pod's current spec."""
    wanted = next(c for c in pod.containers if c.name == name)
    exited = state is ContainerState.EXITED
    return ContainerInfo(
        id=ContainerID(f"{name}-{attempt}"),
        sandbox_id=SandboxID("sb0"),
        name=name,
        attempt=attempt,
        state=state,
        created_at=T0 + attempt * 10 * SECOND,
        image=wanted.image,
        image_ref="sha256:feed",
        labels={},
        annotations={CONTAINER_HASH: wanted.hash if spec_hash is None else spec_hash},
        started_at=T0 + (attempt * 10 + 1) * SECOND,
        finished_at=T0 + (attempt * 10 + 5) * SECOND if exited else 0,
        exit_code=exit_code,
    )


def runtime(*objects: SandboxInfo | ContainerInfo) -> PodRuntime:
    """A PodRuntime holding ``objects``, each kind newest first as ``podsync.inspect`` sorts."""
    boxes = sorted((o for o in objects if isinstance(o, SandboxInfo)), key=lambda s: -s.created_at)
    ctrs = [o for o in objects if isinstance(o, ContainerInfo)]
    ctrs.sort(key=lambda c: (c.attempt, c.created_at), reverse=True)
    return PodRuntime(UID, tuple(boxes), tuple(ctrs))


def resource_pod(*containers: Any, init: tuple[Any, ...] = (), uid: str = "u1", **spec: Any) -> Pod:
    """A pod whose containers carry the given ``resources`` (None: none); an init entry
    given as ``(resources, "Always")`` is a sidecar."""

    def entry(prefix: str, i: int, r: Any) -> dict[str, Any]:
        c: dict[str, Any] = {"name": f"{prefix}{i}", "image": "busybox"}
        if isinstance(r, tuple):
            r, c["restartPolicy"] = r
        if r is not None:
            c["resources"] = r
        return c

    return parse_pod(
        {
            "metadata": {"name": "p", "uid": uid},
            "spec": {
                "containers": [entry("c", i, r) for i, r in enumerate(containers)],
                "initContainers": [entry("i", i, r) for i, r in enumerate(init)],
                **spec,
            },
        }
    )


def fake_syncer(
    runtime: FakeRuntime,
    tmp: Path,
    objects: ApiObjects | None = None,
    events: EventRecorder | None = None,
    metrics: PodMetrics | None = None,
) -> PodSyncer:
    """A pod syncer on the fake runtime, with its cgroups and dirs under ``tmp``; API
    objects from ``objects`` (default: none, as on a standalone node). The node has a
    cluster DNS, as a cluster's nodes have, and no resolver file of its own."""
    dns = DnsSettings(("10.96.0.10",), "cluster.local", "")
    node = NodeInfo("node", ("10.0.0.1",), tmp / "root", dns=dns)
    (tmp / "cgroup").mkdir()
    cgroups = PodCgroups(CgroupTree(tmp / "cgroup", v2=True), 2000, 2**30)
    objects = ApiObjects(standalone=True) if objects is None else objects
    events = EventRecorder() if events is None else events
    return PodSyncer(
        runtime,
        tmp / "logs",
        events,
        PodSetup(node, objects, events),
        cgroups,
        objects,
        metrics or PodMetrics(),
    )


class RecordingWorkers:
    """Stands in for PodWorkers: records which pods got work, runs nothing."""

    def __init__(self) -> None:
        self.updates: list[str] = []

    def update(self, uid: str, work: Any, urgent: bool = False) -> None:
        self.updates.append(uid)

    def busy(self, uid: str) -> bool:
        return False


def sync_loop(
    tmp: Path,
    pods: Pods,
    workers: Any,
    *,
    publish: Callable[[Message], None] = lambda message: None,
    runtime: FakeRuntime | None = None,
    events: EventRecorder | None = None,
    objects: ApiObjects | None = None,
    metrics: PodMetrics | None = None,
    node: admission.Node = NODE,
) -> SyncLoop:
    """A sync loop on the fake runtime whose pod work goes to ``workers`` (a stand-in for
    PodWorkers: ``update`` and ``busy``); API objects from ``objects`` (default: none)."""
    runtime = runtime or FakeRuntime()
    parts = Parts(
        runtime=runtime,
        syncer=fake_syncer(runtime, tmp),
        pod_workers=workers,
        pods=pods,
        probes=ProbeResults(),
        events=events or EventRecorder(),
        admitter=admission.Admitter(node),
        sync_frequency=60.0,
        objects=objects or ApiObjects(),
        metrics=metrics or PodMetrics(),
    )
    return SyncLoop(parts, publish)
