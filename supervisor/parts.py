"""The parent's parts, built from the configuration: the bus and the control socket, the
pod book, the sync loop with its pod syncer and pod workers, garbage collection, the node's
state, shutdown and pressure. ``build`` makes them (binding the bus and control sockets and
setting up the pod cgroups); the Agent (``agent.py``) runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from pkletd.ipc.bus.sockets import ParentBus
from pkletd.ipc.bus.workername import WorkerName
from pkletd.supervisor import workerset
from pkletd.supervisor.config import KubeletConfig
from pkletd.supervisor.control import ControlServer
from pkletd.supervisor.forkserver import ForkServer
from pkletd.supervisor.metrics.report import AgentMetrics
from pkletd.supervisor.metrics.runtimeops import RuntimeOperations
from pkletd.supervisor.node import addresses
from pkletd.supervisor.node.cluster import NodeState
from pkletd.supervisor.node.facts import MachineFacts, node_allocatable, node_capacity, node_labels
from pkletd.supervisor.node.pressure import NodePressure
from pkletd.supervisor.node.shutdown import NodeShutdown
from pkletd.supervisor.notify import Notifier
from pkletd.supervisor.pods import admission, sysctls
from pkletd.supervisor.pods.apiview import ApiView
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.cgroups.podcgroups import PodCgroups
from pkletd.supervisor.pods.csidrivers import CsiDrivers
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.garbage import GarbageCollector, Thresholds
from pkletd.supervisor.pods.garbagecheck import GarbageCheck
from pkletd.supervisor.pods.garbageremover import GarbageRemover
from pkletd.supervisor.pods.keyring import NO_NODE_CREDENTIALS, NodeCredentials
from pkletd.supervisor.pods.nodeinfo import DnsSettings, NodeInfo, kernel_version
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podsync import PodSyncer
from pkletd.supervisor.pods.podworkers import PodWorkers
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.rejectedmanifests import RejectedManifests
from pkletd.supervisor.pods.runtime import Runtime
from pkletd.supervisor.pods.setup import apparmor
from pkletd.supervisor.pods.setup.csivolumes import CsiVolumes
from pkletd.supervisor.pods.setup.podsetup import PodSetup
from pkletd.supervisor.pods.syncloop import Parts, SyncLoop


@dataclass(frozen=True, slots=True)
class ParentParts:
    config: KubeletConfig
    workers: tuple[WorkerName, ...]  # the workers this configuration runs, in start order
    forkserver: ForkServer
    runtime: Runtime
    metrics: AgentMetrics  # counts the runtime's calls
    bus: ParentBus
    control: ControlServer
    notifier: Notifier
    pod_workers: PodWorkers
    probes: ProbeResults
    pods: Pods
    events: EventRecorder
    machine: MachineFacts  # read once, for the node object and the pods' node info
    node: NodeState
    sync: SyncLoop
    garbage: GarbageCollector
    node_shutdown: NodeShutdown
    pressure: NodePressure
    manifests: RejectedManifests  # the static manifests the sources refused, by file
    csi_volumes: CsiVolumes  # the CSI volumes staged and published here
    csi_drivers: CsiDrivers  # the CSI drivers registered on the node (plugin-watcher)
    api_view: ApiView = field(default_factory=ApiView)  # relayed to the status manager


def build(
    config: KubeletConfig,
    forkserver: ForkServer,
    workers: list[WorkerName],
    runtime: Runtime,
    operations: RuntimeOperations,
    node_credentials: NodeCredentials = NO_NODE_CREDENTIALS,
) -> ParentParts:
    """The parts; ``node_credentials``: the credential provider plugins' pull credentials."""
    metrics = AgentMetrics(config.node_name, operations)
    run_dir = Path(config.run_dir)
    bus, control = ParentBus(run_dir), ControlServer(run_dir)
    pod_workers, probes = PodWorkers(config.pod_sync_parallelism), ProbeResults()
    host_ip = addresses.host_ip(config.node_ip, config.node_name)
    pods = Pods(host_ip, workerset.sources(workers), probes)
    events = EventRecorder()
    machine = MachineFacts.read(Path(config.root_dir))
    node_info = _node_info(config, machine, host_ip)
    # Without the worker that reads them (no API server) there are no objects to wait for.
    objects = ApiObjects(WorkerName.POD_OBJECTS not in workers, config.node_name)
    drivers = CsiDrivers()  # registered by the plugin-watcher, read by pod workers
    setup = PodSetup(node_info, objects, events, drivers)
    setup.dns.check_node_file()  # the kubelet's check as its sync loop starts
    setup.volumes.csi.reconstruct()  # what the pkletd before this one mounted
    syncer = PodSyncer(
        runtime,
        Path(config.pod_logs_dir),
        events,
        setup,
        PodCgroups.host(config.pod_pids_limit).start(),
        objects,
        metrics.pods,
        node_credentials=node_credentials,
    )
    labels = node_labels(config, machine)
    sync_parts = Parts(
        runtime=runtime,
        syncer=syncer,
        pod_workers=pod_workers,
        pods=pods,
        probes=probes,
        events=events,
        admitter=admission.Admitter(_admitted(node_info, config, labels), objects.standalone),
        sync_frequency=config.sync_frequency,
        objects=objects,
        metrics=metrics.pods,
    )
    sync = SyncLoop(sync_parts, bus.publish)
    garbage = GarbageCollector(
        GarbageCheck(pods, pod_workers.busy),
        GarbageRemover(runtime, Path(config.pod_logs_dir)),
        events,
        config.node_name,
        Thresholds(config.image_gc_high_threshold_percent, config.image_gc_low_threshold_percent),
        bus.publish,
    )
    return ParentParts(
        config=config,
        workers=tuple(workers),
        forkserver=forkserver,
        runtime=runtime,
        metrics=metrics,
        bus=bus,
        control=control,
        notifier=Notifier(),
        pod_workers=pod_workers,
        probes=probes,
        pods=pods,
        events=events,
        machine=machine,
        node=NodeState(config.node_name, bool(config.kubeconfig), events),
        sync=sync,
        garbage=garbage,
        node_shutdown=NodeShutdown.of(config, sync, events),
        pressure=NodePressure(config.node_name, events),
        manifests=RejectedManifests(),
        csi_volumes=setup.volumes.csi,
        csi_drivers=drivers,
    )


def _admitted(node: NodeInfo, config: KubeletConfig, labels: dict[str, str]) -> admission.Node:
    """The node as admission sees it; the host's AppArmor is read once, as the kubelet."""
    allowed = sysctls.Allowlist.of(config.allowed_unsafe_sysctls, node.kernel)
    return admission.Node.of(node, config.max_pods, labels, allowed, apparmor.host_enabled())


def _node_info(config: KubeletConfig, machine: MachineFacts, host_ip: str) -> NodeInfo:
    """What the pods may learn of the node: its name, address, root dir, allocatable,
    the containers' defaults and the cluster's DNS settings."""
    allocatable = node_allocatable(config, node_capacity(config, machine))
    return NodeInfo(
        config.node_name,
        (host_ip,),
        Path(config.root_dir),
        cpu=allocatable["cpu"],
        memory=allocatable["memory"],
        ephemeral_storage=allocatable.get("ephemeral-storage", Fraction(0)),
        kernel=kernel_version(),
        seccomp_default=config.seccomp_default,
        dns=DnsSettings(
            config.cluster_dns,
            config.cluster_domain,
            config.resolv_conf,
            tuple(ip.strip() for ip in config.node_ip.split(",") if ip.strip()),
        ),
    )
