"""The raw CRI floor: pods started by bare CRI calls, with pkletd's own requests.

The floor starts pods by bare CRI calls on one gRPC channel from a
ThreadPoolExecutor of the parallelism of pkletd's pod-sync pool (10), in the
kubelet's order per pod: RunPodSandbox, then each init container
CreateContainer -> StartContainer and wait for it to exit (ContainerStatus
polled every ``init_poll_s``, with a deadline), then each app container
CreateContainer -> StartContainer. Per-pod latency: t0 -> that pod's last
StartContainer returned; total: all returned; all requests are built before t0.
Also kept: the median of each CRI call, of the init exit poll, and of the "init
gap" (an init container's StartContainer returned -> the next one's returned).

The requests are pkletd's own: before the measured runs, pkletd starts one pod
of the same manifest and the bench reads back from containerd (verbose
PodSandboxStatus and ContainerStatus) the sandbox and container configs it
sent (``probe_shape``), then gives each floor pod those configs with its own
name, UID and log directory (made by the pod's thread, as pkletd does). So the
floor pays whatever pkletd asks of the runtime (hostNetwork, the kubelet's
forced RuntimeDefault seccomp for the sandbox, masked paths, ...) and the ratio
is pkletd's own overhead. ``--floor-shape minimal`` uses hand-built minimal
requests instead (``minimal_configs``: no security context).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cri_api.v1 import api_pb2
from google.protobuf import json_format

from tests.bench.common import (
    CRI_TIMEOUT,
    BenchPkletd,
    CpuMeter,
    clean_runtime,
    cpu_line,
    percentile,
)
from tests.harness.containerd import PrivateContainerd, cri_channel, runtime_service
from tests.harness.node import NODE, dump_logs

INIT_EXIT_DEADLINE_S = 60.0

Manifest = Callable[[str], dict[str, Any]]  # a pod's manifest from its short name


@dataclass
class StartRun:
    """One start-up run: per-pod latencies from a common t0."""

    kind: str
    latencies: dict[str, float]
    total: float
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def p50(self) -> float:
        return percentile(list(self.latencies.values()), 50)

    @property
    def p99(self) -> float:
        return percentile(list(self.latencies.values()), 99)

    def line(self) -> str:
        return (
            f"total {self.total:.2f} s, p50 {self.p50:.2f} s, p99 {self.p99:.2f} s "
            f"{cpu_line(self.extra)}"
        )


@dataclass(frozen=True)
class PodRequests:
    """What the floor sends for one pod: sandbox config, container configs in start order."""

    name: str
    log_dir: Path
    sandbox: Any
    containers: tuple[Any, ...]  # init containers first (``init_count``), then app containers
    init_count: int


@dataclass(frozen=True)
class Shape:
    """The requests pkletd sent for one pod, as containerd keeps them (protobuf JSON)."""

    sandbox: dict[str, Any]
    containers: tuple[dict[str, Any], ...]  # in the manifest's order, init containers first
    init_count: int
    short_name: str  # the manifest's name, e.g. b000
    pod_name: str  # b000-<node>
    uid: str
    log_root: str  # pkletd's pod logs dir, parent of the sandbox's log directory


def start_order(manifest: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The manifest's containers in the kubelet's start order, and how many are init ones."""
    spec = manifest["spec"]
    init = list(spec.get("initContainers", []))
    return [*init, *spec["containers"]], len(init)


def floor_identity(name: str) -> tuple[str, str]:
    """A floor pod's full name and UID."""
    pod_name = f"{name}-{NODE}"
    return pod_name, hashlib.md5(
        f"bench-floor/{pod_name}".encode(), usedforsecurity=False
    ).hexdigest()


def minimal_configs(name: str, logs_root: Path, manifest: Manifest) -> PodRequests:
    """Pod ``name``'s log dir, sandbox config and container configs, built by hand.

    A minimal kubelet-like shape for ``manifest(name)`` as a static pod: the
    kubelet's labels and annotations, hostNetwork (NODE network, CONTAINER pid,
    POD ipc namespaces), a log directory, the same images and commands, log paths
    ``<container>/0.log``; no security context (no seccomp, masked paths, user).
    """
    pod = manifest(name)
    pod_name, uid = floor_identity(name)
    namespace = "default"
    spec = pod["spec"]
    identity = {
        "io.kubernetes.pod.name": pod_name,
        "io.kubernetes.pod.namespace": namespace,
        "io.kubernetes.pod.uid": uid,
    }
    log_dir = logs_root / f"{namespace}_{pod_name}_{uid}"
    network = api_pb2.NODE if spec.get("hostNetwork") else api_pb2.POD
    sandbox = api_pb2.PodSandboxConfig(
        metadata=api_pb2.PodSandboxMetadata(name=pod_name, namespace=namespace, uid=uid),
        hostname="",
        log_directory=str(log_dir),
        labels={**pod["metadata"]["labels"], **identity},
        annotations={"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": uid},
        linux=api_pb2.LinuxPodSandboxConfig(
            security_context=api_pb2.LinuxSandboxSecurityContext(
                namespace_options=api_pb2.NamespaceOption(
                    network=network, pid=api_pb2.CONTAINER, ipc=api_pb2.POD
                )
            )
        ),
    )
    containers, init_count = start_order(pod)
    configs = tuple(
        api_pb2.ContainerConfig(
            metadata=api_pb2.ContainerMetadata(name=container["name"], attempt=0),
            image=api_pb2.ImageSpec(image=container["image"]),
            command=container["command"],
            labels={**identity, "io.kubernetes.container.name": container["name"]},
            annotations={
                "io.kubernetes.container.hash": "00000000",
                "io.kubernetes.container.restartCount": "0",
                "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
                "io.kubernetes.container.terminationMessagePolicy": "File",
                "io.kubernetes.pod.terminationGracePeriod": str(
                    spec["terminationGracePeriodSeconds"]
                ),
            },
            log_path=f"{container['name']}/0.log",
        )
        for container in containers
    )
    return PodRequests(name, log_dir, sandbox, configs, init_count)


def read_shape(address: str, short_name: str, manifest: dict[str, Any]) -> Shape:
    """The configs of the only pod in the runtime (pkletd's), from verbose status."""
    ordered, init_count = start_order(manifest)
    with cri_channel(address) as channel:
        rt = runtime_service(channel)
        [sandbox] = rt.ListPodSandbox(api_pb2.ListPodSandboxRequest(), timeout=30).items
        containers = rt.ListContainers(api_pb2.ListContainersRequest(), timeout=30).containers
        by_name = {c.metadata.name: c for c in containers}
        if len(by_name) != len(containers) or set(by_name) != {c["name"] for c in ordered}:
            found = sorted(c.metadata.name for c in containers)
            raise AssertionError(f"pkletd's pod has containers {found}, want one of each")
        status = rt.PodSandboxStatus(
            api_pb2.PodSandboxStatusRequest(pod_sandbox_id=sandbox.id, verbose=True), timeout=30
        )
        sandbox_config = json.loads(status.info["info"])["config"]
        configs = []
        for container in ordered:
            request = api_pb2.ContainerStatusRequest(
                container_id=by_name[container["name"]].id, verbose=True
            )
            status = rt.ContainerStatus(request, timeout=30)
            configs.append(json.loads(status.info["info"])["config"])
    return Shape(
        sandbox_config,
        tuple(configs),
        init_count,
        short_name,
        sandbox.metadata.name,
        sandbox.metadata.uid,
        str(Path(sandbox_config["log_directory"]).parent),
    )


def probe_shape(address: str, parallelism: int, keep: bool, manifest: Manifest) -> Shape:
    """Start one pod with pkletd and read back the requests it sent for it."""
    agent = BenchPkletd(address, parallelism)
    try:
        agent.start()
        short_name = "b000"
        agent.put(short_name, manifest(short_name))
        agent.wait_pod_running(short_name, timeout=60)
        return read_shape(address, short_name, manifest(short_name))
    except BaseException:
        dump_logs(agent)
        keep = True
        raise
    finally:
        agent.shutdown(keep)
        clean_runtime(address)


def _substitute(value: Any, swap: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return swap(value)
    if isinstance(value, dict):
        return {k: _substitute(v, swap) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, swap) for v in value]
    return value


def shaped_configs(shape: Shape, name: str, logs_root: Path) -> PodRequests:
    """Pod ``name``'s log dir, sandbox and container configs: pkletd's, with its identity."""
    pod_name, uid = floor_identity(name)

    def swap(text: str) -> str:
        text = text.replace(shape.log_root, str(logs_root)).replace(shape.uid, uid)
        text = text.replace(shape.pod_name, pod_name)
        return name if text == shape.short_name else text

    sandbox = json_format.ParseDict(
        _substitute(shape.sandbox, swap), api_pb2.PodSandboxConfig(), ignore_unknown_fields=True
    )
    containers = tuple(
        json_format.ParseDict(
            _substitute(config, swap), api_pb2.ContainerConfig(), ignore_unknown_fields=True
        )
        for config in shape.containers
    )
    return PodRequests(name, Path(sandbox.log_directory), sandbox, containers, shape.init_count)


def wait_exited(rt: Any, container_id: str, every: float) -> None:
    """Poll ContainerStatus until the (init) container exited; it must have exited 0."""
    deadline = time.perf_counter() + INIT_EXIT_DEADLINE_S
    request = api_pb2.ContainerStatusRequest(container_id=container_id)
    while True:
        status = rt.ContainerStatus(request, timeout=CRI_TIMEOUT).status
        if status.state == api_pb2.CONTAINER_EXITED:
            if status.exit_code != 0:
                raise AssertionError(f"init container {container_id} exited {status.exit_code}")
            return
        if time.perf_counter() >= deadline:
            raise AssertionError(f"init container {container_id} still running after deadline")
        time.sleep(every)


def run_floor(
    address: str,
    names: list[str],
    parallelism: int,
    logs_root: Path,
    daemon: PrivateContainerd,
    build: Callable[[str, Path], PodRequests],
    init_poll_s: float = 0.01,
) -> StartRun:
    """The pods ``names`` (requests from ``build``) by bare CRI calls, ``parallelism`` threads."""
    requests = [build(name, logs_root) for name in names]
    calls: dict[str, list[float]] = {
        "sandbox": [],
        "create": [],
        "start": [],
        "init_wait": [],
        "init_gap": [],
    }
    with cri_channel(address) as channel:
        rt = runtime_service(channel)
        rt.Version(api_pb2.VersionRequest(), timeout=10)  # connect before t0

        def start_one(pod: PodRequests, t0: float) -> tuple[str, float]:
            pod.log_dir.mkdir(parents=True, exist_ok=True)
            a = time.perf_counter()
            sandbox_id = rt.RunPodSandbox(
                api_pb2.RunPodSandboxRequest(config=pod.sandbox), timeout=CRI_TIMEOUT
            ).pod_sandbox_id
            calls["sandbox"].append(time.perf_counter() - a)
            init_started: float | None = None
            for index, config in enumerate(pod.containers):
                b = time.perf_counter()
                container_id = rt.CreateContainer(
                    api_pb2.CreateContainerRequest(
                        pod_sandbox_id=sandbox_id, config=config, sandbox_config=pod.sandbox
                    ),
                    timeout=CRI_TIMEOUT,
                ).container_id
                c = time.perf_counter()
                rt.StartContainer(
                    api_pb2.StartContainerRequest(container_id=container_id), timeout=CRI_TIMEOUT
                )
                d = time.perf_counter()
                calls["create"].append(c - b)
                calls["start"].append(d - c)
                if init_started is not None:  # init container started -> the next one started
                    calls["init_gap"].append(d - init_started)
                init_started = None
                if index < pod.init_count:
                    wait_exited(rt, container_id, init_poll_s)
                    calls["init_wait"].append(time.perf_counter() - d)
                    init_started = d
            return pod.name, time.perf_counter() - t0

        with ThreadPoolExecutor(parallelism, thread_name_prefix="floor") as pool:
            meter = CpuMeter(daemon, {})
            t0 = time.perf_counter()
            futures = [pool.submit(start_one, pod, t0) for pod in requests]
            latencies = dict(f.result() for f in futures)
            total = time.perf_counter() - t0
            cpu = meter.read()
    extra = {f"{k}_call_median_s": statistics.median(v) for k, v in calls.items() if v}
    extra.update(cpu)
    return StartRun("floor", latencies, total, extra)
