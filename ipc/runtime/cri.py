"""A typed client for the CRI runtime.v1 API (RuntimeService and ImageService).

The only module that touches the generated stubs. Everything else in pkletd sees
plain frozen dataclasses (``SandboxSpec`` in, ``SandboxInfo`` out, ...), so the
rest of the code is independent of protobuf and easy to fake. Each process makes
its own ``CriRuntime`` after it was forked: a gRPC channel never crosses a fork.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, NewType, TypeVar

import grpc
from cri_api.v1 import api_pb2 as pb
from grpc import _channel  # noqa: F401 (imported at the first channel: here, in the fork server)
from pkletd.ipc.apimodel.podspec import PodUID

T = TypeVar("T")
ContainerID = NewType("ContainerID", str)
SandboxID = NewType("SandboxID", str)

POD_UID_LABEL = "io.kubernetes.pod.uid"
# Told of every call: the CRI method, its seconds, whether it failed (the parent's metrics).
CallObserver = Callable[[str, float, bool], None]


class ContainerState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"


class SandboxState(enum.Enum):
    READY = "ready"
    NOTREADY = "notready"


class NamespaceMode(enum.Enum):
    """CRI ``NamespaceMode``: whose namespace a container joins."""

    POD = "POD"  # the pod's (its sandbox's)
    CONTAINER = "CONTAINER"  # its own
    NODE = "NODE"  # the host's
    TARGET = "TARGET"  # another container's (``NamespaceSpec.target_id``), PID only


_CONTAINER_STATES = {
    pb.CONTAINER_CREATED: ContainerState.CREATED,
    pb.CONTAINER_RUNNING: ContainerState.RUNNING,
    pb.CONTAINER_EXITED: ContainerState.EXITED,
    pb.CONTAINER_UNKNOWN: ContainerState.UNKNOWN,
}


class CriError(RuntimeError):
    """A CRI call failed; ``code`` is the gRPC status code name."""

    def __init__(self, method: str, target: str, code: str, detail: str) -> None:
        super().__init__(f"{method} {target}: {code}: {detail}")
        self.method = method
        self.code = code
        self.detail = detail

    @property
    def not_found(self) -> bool:
        return self.code == "NOT_FOUND"

    @property
    def rpc_message(self) -> str:
        """The error as the kubelet's gRPC client prints it (``rpc error: code = NotFound desc =
        ...``), which its pull messages quote; an Unknown one is its description alone."""
        if self.code == "UNKNOWN":
            return self.detail
        return self.status_text

    @property
    def status_text(self) -> str:
        """The error as Go's gRPC status prints it, whatever its code: what the kubelet's
        streaming endpoints answer with."""
        code = "".join(word.capitalize() for word in self.code.split("_"))
        return f"rpc error: code = {code} desc = {self.detail}"


def unless_gone(call: Callable[..., T], *args: object) -> T | None:
    """Make a CRI call whose object may already be gone: its result, or None on NOT_FOUND."""
    try:
        return call(*args)
    except CriError as exc:
        if not exc.not_found:
            raise
        return None


@dataclass(frozen=True, slots=True)
class PortSpec:
    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class MountSpec:
    container_path: str
    host_path: str
    readonly: bool = False
    propagation: str = "private"  # "private", "host-to-container" or "bidirectional"


@dataclass(frozen=True, slots=True)
class SeccompSpec:
    type: str  # "RuntimeDefault", "Unconfined" or "Localhost"
    localhost_ref: str = ""


ProfileSpec = SeccompSpec  # a CRI SecurityProfile: AppArmor's has the same three types


@dataclass(frozen=True, slots=True)
class SELinuxSpec:
    """CRI ``SELinuxOption``: the label's parts; the runtime fills in what is empty."""

    user: str = ""
    role: str = ""
    type: str = ""
    level: str = ""


@dataclass(frozen=True, slots=True)
class NamespaceSpec:
    """CRI ``NamespaceOption``: the namespaces the sandbox, or one container, lives in.
    The defaults are a plain pod's (``kuberuntime/util.NamespacesForPod``)."""

    network: NamespaceMode = NamespaceMode.POD
    pid: NamespaceMode = NamespaceMode.CONTAINER
    ipc: NamespaceMode = NamespaceMode.POD
    target_id: str = ""  # pid TARGET: the container whose PID namespace it joins


@dataclass(frozen=True, slots=True)
class SandboxSecuritySpec:
    run_as_user: int | None = None
    run_as_group: int | None = None
    supplemental_groups: tuple[int, ...] = ()
    privileged: bool = False
    seccomp: SeccompSpec | None = None
    selinux: SELinuxSpec | None = None


@dataclass(frozen=True, slots=True)
class ContainerSecuritySpec:
    run_as_user: int | None = None
    run_as_username: str = ""
    run_as_group: int | None = None
    supplemental_groups: tuple[int, ...] = ()
    privileged: bool = False
    readonly_rootfs: bool = False
    add_capabilities: tuple[str, ...] = ()
    drop_capabilities: tuple[str, ...] = ()
    no_new_privs: bool = False
    seccomp: SeccompSpec | None = None
    masked_paths: tuple[str, ...] = ()
    readonly_paths: tuple[str, ...] = ()
    apparmor: ProfileSpec | None = None
    selinux: SELinuxSpec | None = None


@dataclass(frozen=True, slots=True)
class DnsSpec:
    """``DNSConfig``: what the runtime writes into the sandbox's resolv.conf."""

    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()  # ``ndots:5``, ``edns0``


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    name: str
    namespace: str
    uid: PodUID
    attempt: int
    hostname: str
    log_directory: str
    host_network: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[PortSpec, ...] = ()
    sysctls: Mapping[str, str] = field(default_factory=dict)
    security: SandboxSecuritySpec | None = None
    cgroup_parent: str = ""  # the pod's cgroup (``/kubepods/burstable/pod<uid>``)
    runtime_handler: str = ""  # RunPodSandbox's: the pod's RuntimeClass handler ("" default)
    overhead: ContainerResources | None = None  # the pod's overhead (requests = limits)
    resources: ContainerResources | None = None  # the pod's containers' totals, no overhead
    namespaces: NamespaceSpec | None = None  # None: the defaults, network by host_network
    dns: DnsSpec | None = None  # None: the runtime's default (a copy of the host's file)


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """``LinuxContainerResources``: 0 leaves a value to the runtime (quota 0: no limit)."""

    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit_in_bytes: int = 0
    oom_score_adj: int = 0
    unified: tuple[tuple[str, str], ...] = ()  # cgroup v2 files and values


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    name: str
    attempt: int
    image: str
    log_path: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    env: tuple[tuple[str, str], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[MountSpec, ...] = ()
    security: ContainerSecuritySpec | None = None
    resources: ContainerResources | None = None
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False
    namespaces: NamespaceSpec | None = None  # None: its sandbox's


@dataclass(frozen=True, slots=True)
class SandboxInfo:
    id: SandboxID
    name: str
    namespace: str
    uid: PodUID
    attempt: int
    state: SandboxState
    created_at: int
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    ip: str = ""
    host_network: bool | None = None  # known from PodSandboxStatus only
    runtime_handler: str = ""  # the handler it runs with ("" the runtime's default)


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """A container as listed; the ``status_*`` fields come from ContainerStatus."""

    id: ContainerID
    sandbox_id: SandboxID
    name: str
    attempt: int
    state: ContainerState
    created_at: int
    image: str
    image_ref: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    mounts: tuple[tuple[str, str], ...] = ()  # (container path, host path)
    log_path: str = ""  # the full path of its log file

    @property
    def pod_uid(self) -> PodUID:
        return PodUID(self.labels.get(POD_UID_LABEL, ""))


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """An image the runtime has: its id, the user it runs as (uid, or None and a name), its size."""

    id: str
    uid: int | None
    username: str = ""
    size: int = 0  # bytes


@dataclass(frozen=True, slots=True)
class RuntimeCondition:
    """One condition of CRI Status (``RuntimeReady``, ``NetworkReady``)."""

    type: str
    status: bool
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class RegistryAuth:
    """Credentials for one pull (CRI ``AuthConfig``), as the kubelet sends a pull secret's.
    The password stays out of ``repr``, so it never reaches a log line."""

    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ListedImage:
    """An image as CRI ListImages reports it: its names, its size in bytes, and whether the
    runtime pinned it (kept from garbage collection, as containerd 1.7+ pins its sandbox
    image)."""

    id: str
    repo_tags: tuple[str, ...]
    repo_digests: tuple[str, ...]
    size: int
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class FilesystemUsage:
    """CRI ``FilesystemUsage``: a filesystem (by mount point) and what is used on it; the
    counts are None when the runtime left them unset."""

    timestamp_ns: int
    mountpoint: str
    used_bytes: int | None
    inodes_used: int | None


@dataclass(frozen=True, slots=True)
class ContainerStatsInfo:
    """CRI ``ContainerStats``: what pkletd reads of it (the writable layer's usage)."""

    id: ContainerID
    name: str
    labels: Mapping[str, str]
    writable_layer: FilesystemUsage | None

    @property
    def pod_uid(self) -> PodUID:
        return PodUID(self.labels.get(POD_UID_LABEL, ""))


@dataclass(frozen=True, slots=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True, slots=True)
class StreamFlags:
    """Which streams an exec or attach session carries, and whether it is a terminal."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


class _Service:
    """One CRI service's methods on a channel, each made at its first call from the service's
    descriptor. A process calls a few of them: the generated stubs make all ~35 (about 0.5 MB
    of every process that speaks CRI)."""

    def __init__(self, channel: grpc.Channel, name: str) -> None:
        self._channel = channel
        self._described = pb.DESCRIPTOR.services_by_name[name]
        self._methods: dict[str, grpc.UnaryUnaryMultiCallable[Any, Any]] = {}

    def method(self, name: str) -> grpc.UnaryUnaryMultiCallable[Any, Any]:
        made = self._methods.get(name)
        if made is None:  # two threads may both make it: either is as good
            rpc = self._described.methods_by_name[name]
            made = self._channel.unary_unary(
                f"/{self._described.full_name}/{name}",
                request_serializer=getattr(pb, rpc.input_type.name).SerializeToString,
                response_deserializer=getattr(pb, rpc.output_type.name).FromString,
                _registered_method=True,  # as the generated stubs
            )
            self._methods[name] = made
        return made


@dataclass(frozen=True, slots=True)
class _Stubs:
    channel: grpc.Channel
    runtime: _Service
    images: _Service

    @classmethod
    def of(cls, channel: grpc.Channel) -> _Stubs:
        return cls(channel, _Service(channel, "RuntimeService"), _Service(channel, "ImageService"))


class CriRuntime:
    """The real runtime, over gRPC on a unix socket."""

    def __init__(self, endpoint: str, timeout: float, observer: CallObserver | None = None) -> None:
        self._stubs: _Stubs | None = None  # the channel, made at the first call
        self._connecting = threading.Lock()
        self._closed = False
        self._timeout = timeout
        self._observer = observer
        self.endpoint = endpoint

    def close(self) -> None:
        with self._connecting:
            self._closed = True
            if self._stubs is not None:
                self._stubs.channel.close()

    def _connected(self) -> _Stubs:
        """The channel and its stubs, made at the first call (a process's first gRPC channel
        costs a few ms: a restarted http worker serves before it needs one)."""
        stubs = self._stubs
        if stubs is None:
            with self._connecting:
                if self._closed:
                    raise ValueError("Cannot invoke RPC on closed channel!")  # as gRPC's
                if self._stubs is None:
                    self._stubs = _Stubs.of(grpc.insecure_channel(self.endpoint))
                stubs = self._stubs
        return stubs

    @property
    def _runtime(self) -> _Service:
        return self._connected().runtime

    @property
    def _images(self) -> _Service:
        return self._connected().images

    def _call(
        self, service: _Service, method: str, request: Any, target: str, timeout: float = 0
    ) -> Any:
        started = time.monotonic()
        failed = False
        try:
            return service.method(method)(request, timeout=timeout or self._timeout)
        except grpc.RpcError as exc:
            failed = True
            raise CriError(method, target, exc.code().name, exc.details() or "") from exc
        finally:
            if self._observer is not None:
                self._observer(method, time.monotonic() - started, failed)

    # --- reading ---------------------------------------------------------------------

    def version(self) -> str:
        reply = self._call(self._runtime, "Version", pb.VersionRequest(), "runtime")
        return f"{reply.runtime_name} {reply.runtime_version}"

    def runtime_conditions(self) -> list[RuntimeCondition]:
        """The runtime's conditions from CRI Status (RuntimeReady, NetworkReady, ...)."""
        reply = self._call(self._runtime, "Status", pb.StatusRequest(), "runtime")
        return [
            RuntimeCondition(c.type, bool(c.status), c.reason, c.message)
            for c in reply.status.conditions
        ]

    def list_images(self) -> list[ListedImage]:
        """Every image the runtime has (CRI ListImages)."""
        reply = self._call(self._images, "ListImages", pb.ListImagesRequest(), "images")
        return [
            ListedImage(i.id, tuple(i.repo_tags), tuple(i.repo_digests), int(i.size), i.pinned)
            for i in reply.images
        ]

    def sandbox_image(self) -> str:
        """The image the runtime runs sandboxes from, as its verbose CRI Status tells it
        (containerd's ``sandboxImage``); "" if the runtime does not say."""
        reply = self._call(self._runtime, "Status", pb.StatusRequest(verbose=True), "runtime")
        try:
            config = json.loads(reply.info.get("config", "{}"))
        except ValueError:
            return ""
        image = config.get("sandboxImage", "") if isinstance(config, dict) else ""
        return image if isinstance(image, str) else ""

    def image_fs_info(self) -> list[FilesystemUsage]:
        """The filesystems the runtime keeps images on (CRI ImageFsInfo)."""
        reply = self._call(self._images, "ImageFsInfo", pb.ImageFsInfoRequest(), "images")
        return [_fs_usage(u) for u in reply.image_filesystems]

    def list_container_stats(self) -> list[ContainerStatsInfo]:
        """Every container's stats as the runtime reports them (CRI ListContainerStats)."""
        request = pb.ListContainerStatsRequest(filter=pb.ContainerStatsFilter())
        reply = self._call(self._runtime, "ListContainerStats", request, "containers")
        return [_container_stats(s) for s in reply.stats]

    def list_sandboxes(self, pod_uid: str = "") -> list[SandboxInfo]:
        selector = {POD_UID_LABEL: pod_uid} if pod_uid else {}
        request = pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(label_selector=selector))
        reply = self._call(self._runtime, "ListPodSandbox", request, f"pod={pod_uid or '*'}")
        return [_sandbox_info(s) for s in reply.items]

    def sandbox_status(self, sandbox_id: SandboxID) -> SandboxInfo:
        request = pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id)
        reply = self._call(self._runtime, "PodSandboxStatus", request, f"sandbox={sandbox_id}")
        status = reply.status
        info = _sandbox_info(status)
        network = status.linux.namespaces.options.network
        return dataclasses.replace(info, ip=status.network.ip, host_network=network == pb.NODE)

    def list_containers(self, pod_uid: str = "") -> list[ContainerInfo]:
        selector = {POD_UID_LABEL: pod_uid} if pod_uid else {}
        request = pb.ListContainersRequest(filter=pb.ContainerFilter(label_selector=selector))
        reply = self._call(self._runtime, "ListContainers", request, f"pod={pod_uid or '*'}")
        return [_container_info(c, c.pod_sandbox_id) for c in reply.containers]

    def find_container(self, container_id: str) -> ContainerInfo | None:
        """One container as ListContainers shows it (filtered by its id), or None if the
        runtime has no such container."""
        request = pb.ListContainersRequest(filter=pb.ContainerFilter(id=container_id))
        reply = self._call(self._runtime, "ListContainers", request, f"container={container_id}")
        found = [c for c in reply.containers if c.id == container_id]
        return _container_info(found[0], found[0].pod_sandbox_id) if found else None

    def find_sandbox(self, sandbox_id: str) -> SandboxInfo | None:
        """One sandbox as ListPodSandbox shows it (filtered by its id), or None if the
        runtime has no such sandbox."""
        request = pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(id=sandbox_id))
        reply = self._call(self._runtime, "ListPodSandbox", request, f"sandbox={sandbox_id}")
        found = [s for s in reply.items if s.id == sandbox_id]
        return _sandbox_info(found[0]) if found else None

    def container_status(self, listed: ContainerInfo) -> ContainerInfo:
        request = pb.ContainerStatusRequest(container_id=listed.id)
        reply = self._call(self._runtime, "ContainerStatus", request, f"container={listed.id}")
        s = reply.status
        return dataclasses.replace(
            _container_info(s, listed.sandbox_id),
            started_at=s.started_at,
            finished_at=s.finished_at,
            exit_code=s.exit_code,
            reason=s.reason,
            message=s.message,
            mounts=tuple((m.container_path, m.host_path) for m in s.mounts),
            log_path=s.log_path,
        )

    def container_state(self, container_id: ContainerID) -> ContainerState:
        request = pb.ContainerStatusRequest(container_id=container_id)
        reply = self._call(self._runtime, "ContainerStatus", request, f"container={container_id}")
        return _CONTAINER_STATES.get(reply.status.state, ContainerState.UNKNOWN)

    def image_status(self, image: str) -> ImageInfo | None:
        """The image if the runtime has it, else None."""
        request = pb.ImageStatusRequest(image=pb.ImageSpec(image=image))
        reply = self._call(self._images, "ImageStatus", request, f"image={image}")
        if not reply.HasField("image"):
            return None
        found = reply.image
        if found.HasField("uid"):
            return ImageInfo(found.id, int(found.uid.value), size=found.size)
        if found.username:
            return ImageInfo(found.id, None, found.username, found.size)
        # neither: the kubelet treats the image as running as root
        return ImageInfo(found.id, 0, size=found.size)

    def exec_sync(self, container_id: str, command: tuple[str, ...], timeout_s: int) -> ExecResult:
        """Run a command in a container and wait (an exec probe's way in)."""
        request = pb.ExecSyncRequest(
            container_id=container_id, cmd=list(command), timeout=timeout_s
        )
        reply = self._call(
            self._runtime, "ExecSync", request, f"container={container_id}", timeout=timeout_s + 5
        )
        return ExecResult(reply.exit_code, bytes(reply.stdout), bytes(reply.stderr))

    # --- streaming (the kubelet API's /exec, /attach, /portForward and /run) --------------

    def exec_url(self, container_id: str, command: tuple[str, ...], flags: StreamFlags) -> str:
        """Where the runtime's streaming server serves this exec session (CRI Exec)."""
        request = pb.ExecRequest(
            container_id=container_id,
            cmd=list(command),
            tty=flags.tty,
            stdin=flags.stdin,
            stdout=flags.stdout,
            stderr=flags.stderr,
        )
        target = f"container={container_id}"
        return _stream_url("Exec", target, self._call(self._runtime, "Exec", request, target))

    def attach_url(self, container_id: str, flags: StreamFlags) -> str:
        """Where the runtime serves an attach to the container's own process (CRI Attach)."""
        request = pb.AttachRequest(
            container_id=container_id,
            tty=flags.tty,
            stdin=flags.stdin,
            stdout=flags.stdout,
            stderr=flags.stderr,
        )
        target = f"container={container_id}"
        return _stream_url("Attach", target, self._call(self._runtime, "Attach", request, target))

    def port_forward_url(self, sandbox_id: SandboxID, ports: tuple[int, ...]) -> str:
        """Where the runtime forwards connections into the sandbox (CRI PortForward)."""
        request = pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=list(ports))
        target = f"sandbox={sandbox_id}"
        reply = self._call(self._runtime, "PortForward", request, target)
        return _stream_url("PortForward", target, reply)

    def run_in_container(self, container_id: str, command: tuple[str, ...]) -> Future[ExecResult]:
        """ExecSync with no time limit, as the kubelet's ``/run`` makes it: the result comes
        on gRPC's own thread, and cancelling the future cancels the call (its client left)."""
        request = pb.ExecSyncRequest(container_id=container_id, cmd=list(command), timeout=0)
        call = self._runtime.method("ExecSync").future(request)
        target = f"container={container_id}"
        result: Future[ExecResult] = Future()

        def finished(done: Any) -> None:
            try:
                reply = done.result()
            except grpc.FutureCancelledError:
                return
            except grpc.RpcError as exc:
                _settle(result, CriError("ExecSync", target, exc.code().name, exc.details() or ""))
                return
            _settle(result, ExecResult(reply.exit_code, bytes(reply.stdout), bytes(reply.stderr)))

        result.add_done_callback(lambda f: call.cancel() if f.cancelled() else None)
        call.add_done_callback(finished)
        return result

    def container_log_path(self, container_id: str) -> str:
        """The file the runtime writes the container's output to (ContainerStatus log_path)."""
        request = pb.ContainerStatusRequest(container_id=container_id)
        reply = self._call(self._runtime, "ContainerStatus", request, f"container={container_id}")
        return str(reply.status.log_path)

    # --- writing (the parent only; and the log-rotator's reopen, its named exception) ----

    def reopen_container_log(self, container_id: str) -> None:
        """Have the runtime open the container's log path afresh (after it was renamed)."""
        request = pb.ReopenContainerLogRequest(container_id=container_id)
        self._call(self._runtime, "ReopenContainerLog", request, f"container={container_id}")

    def pull_image(
        self, image: str, sandbox: SandboxSpec, auth: RegistryAuth | None = None
    ) -> None:
        request = pb.PullImageRequest(
            image=pb.ImageSpec(image=image),
            auth=pb.AuthConfig(username=auth.username, password=auth.password) if auth else None,
            sandbox_config=_sandbox_config(sandbox),
        )
        self._call(self._images, "PullImage", request, f"image={image}")

    def run_sandbox(self, spec: SandboxSpec) -> SandboxID:
        request = pb.RunPodSandboxRequest(
            config=_sandbox_config(spec), runtime_handler=spec.runtime_handler
        )
        reply = self._call(self._runtime, "RunPodSandbox", request, _pod_target(spec))
        return SandboxID(reply.pod_sandbox_id)

    def stop_sandbox(self, sandbox_id: SandboxID) -> None:
        request = pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id)
        self._call(self._runtime, "StopPodSandbox", request, f"sandbox={sandbox_id}")

    def remove_sandbox(self, sandbox_id: SandboxID) -> None:
        request = pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id)
        self._call(self._runtime, "RemovePodSandbox", request, f"sandbox={sandbox_id}")

    def create_container(
        self, sandbox_id: SandboxID, spec: ContainerSpec, sandbox: SandboxSpec
    ) -> ContainerID:
        request = pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id,
            config=_container_config(spec, sandbox_namespaces(sandbox)),
            sandbox_config=_sandbox_config(sandbox),
        )
        target = f"{_pod_target(sandbox)} container={spec.name}"
        reply = self._call(self._runtime, "CreateContainer", request, target)
        return ContainerID(reply.container_id)

    def start_container(self, container_id: ContainerID) -> None:
        request = pb.StartContainerRequest(container_id=container_id)
        self._call(self._runtime, "StartContainer", request, f"container={container_id}")

    def stop_container(self, container_id: ContainerID, grace_s: int) -> None:
        request = pb.StopContainerRequest(container_id=container_id, timeout=grace_s)
        # The runtime may take the whole grace period: give the call that much more.
        self._call(
            self._runtime,
            "StopContainer",
            request,
            f"container={container_id}",
            timeout=self._timeout + grace_s,
        )

    def remove_container(self, container_id: ContainerID) -> None:
        request = pb.RemoveContainerRequest(container_id=container_id)
        self._call(self._runtime, "RemoveContainer", request, f"container={container_id}")

    def remove_image(self, image_id: str) -> None:
        request = pb.RemoveImageRequest(image=pb.ImageSpec(image=image_id))
        self._call(self._images, "RemoveImage", request, f"image={image_id}")


def _stream_url(method: str, target: str, reply: Any) -> str:
    if not reply.url:
        raise CriError(method, target, "UNKNOWN", "URL is not set")
    return str(reply.url)


def _settle(future: Future[T], outcome: T | CriError) -> None:
    """Complete ``future`` unless it was cancelled meanwhile (on another thread)."""
    try:
        if isinstance(outcome, CriError):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
    except InvalidStateError:
        pass


def _fs_usage(u: Any) -> FilesystemUsage:
    return FilesystemUsage(
        timestamp_ns=u.timestamp,
        mountpoint=u.fs_id.mountpoint,
        used_bytes=u.used_bytes.value if u.HasField("used_bytes") else None,
        inodes_used=u.inodes_used.value if u.HasField("inodes_used") else None,
    )


def _container_stats(s: Any) -> ContainerStatsInfo:
    layer = s.writable_layer
    return ContainerStatsInfo(
        id=ContainerID(s.attributes.id),
        name=s.attributes.metadata.name,
        labels=dict(s.attributes.labels),
        writable_layer=_fs_usage(layer) if s.HasField("writable_layer") else None,
    )


def _pod_target(spec: SandboxSpec) -> str:
    return f"pod={spec.namespace}/{spec.name}"


def _sandbox_info(s: Any) -> SandboxInfo:
    state = SandboxState.READY if s.state == pb.SANDBOX_READY else SandboxState.NOTREADY
    return SandboxInfo(
        id=SandboxID(s.id),
        name=s.metadata.name,
        namespace=s.metadata.namespace,
        uid=PodUID(s.metadata.uid),
        attempt=s.metadata.attempt,
        state=state,
        created_at=s.created_at,
        labels=dict(s.labels),
        annotations=dict(s.annotations),
        runtime_handler=s.runtime_handler,
    )


def _container_info(c: Any, sandbox_id: str) -> ContainerInfo:
    return ContainerInfo(
        id=ContainerID(c.id),
        sandbox_id=SandboxID(sandbox_id),
        name=c.metadata.name,
        attempt=c.metadata.attempt,
        state=_CONTAINER_STATES.get(c.state, ContainerState.UNKNOWN),
        created_at=c.created_at,
        image=c.image.image,
        image_ref=c.image_ref,
        labels=dict(c.labels),
        annotations=dict(c.annotations),
    )


def sandbox_namespaces(spec: SandboxSpec) -> NamespaceSpec:
    """The sandbox's namespaces: its own, else the defaults with the network by
    ``host_network``."""
    if spec.namespaces is not None:
        return spec.namespaces
    network = NamespaceMode.NODE if spec.host_network else NamespaceMode.POD
    return NamespaceSpec(network=network)


def _sandbox_config(spec: SandboxSpec) -> Any:
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(
            name=spec.name, namespace=spec.namespace, uid=spec.uid, attempt=spec.attempt
        ),
        hostname=spec.hostname,
        log_directory=spec.log_directory,
        labels=dict(spec.labels),
        annotations=dict(spec.annotations),
        port_mappings=[
            pb.PortMapping(
                protocol=pb.Protocol.Value(p.protocol),
                container_port=p.container_port,
                host_port=p.host_port,
                host_ip=p.host_ip,
            )
            for p in spec.ports
        ],
        linux=pb.LinuxPodSandboxConfig(
            security_context=_sandbox_security(spec.security, sandbox_namespaces(spec)),
            sysctls=dict(spec.sysctls),
            cgroup_parent=spec.cgroup_parent,
            overhead=_optional_resources(spec.overhead),
            resources=_optional_resources(spec.resources),
        ),
        dns_config=_dns_config(spec.dns),
    )


def _dns_config(dns: DnsSpec | None) -> Any:
    if dns is None:
        return None
    return pb.DNSConfig(
        servers=list(dns.servers), searches=list(dns.searches), options=list(dns.options)
    )


def _namespace_option(ns: NamespaceSpec) -> Any:
    return pb.NamespaceOption(
        network=pb.NamespaceMode.Value(ns.network.value),
        pid=pb.NamespaceMode.Value(ns.pid.value),
        ipc=pb.NamespaceMode.Value(ns.ipc.value),
        target_id=ns.target_id,
    )


def _sandbox_security(sc: SandboxSecuritySpec | None, namespaces: NamespaceSpec) -> Any:
    out = pb.LinuxSandboxSecurityContext(namespace_options=_namespace_option(namespaces))
    if sc is None:
        return out
    if sc.run_as_user is not None:
        out.run_as_user.value = sc.run_as_user
    if sc.run_as_group is not None:
        out.run_as_group.value = sc.run_as_group
    out.supplemental_groups.extend(sc.supplemental_groups)
    out.privileged = sc.privileged
    if sc.seccomp is not None:
        out.seccomp.CopyFrom(_seccomp(sc.seccomp))
    if sc.selinux is not None:
        out.selinux_options.CopyFrom(_selinux(sc.selinux))
    return out


def _seccomp(profile: SeccompSpec) -> Any:
    kind = pb.SecurityProfile.ProfileType.Value(profile.type)
    return pb.SecurityProfile(profile_type=kind, localhost_ref=profile.localhost_ref)


def _selinux(label: SELinuxSpec) -> Any:
    return pb.SELinuxOption(user=label.user, role=label.role, type=label.type, level=label.level)


# AppArmor as the deprecated ``apparmor_profile`` string, which containerd 1.6 reads
# (the kubelet sends both forms).
_APPARMOR_NAMES = {"RuntimeDefault": "runtime/default", "Unconfined": "unconfined"}


def _apparmor_name(profile: ProfileSpec) -> str:
    return _APPARMOR_NAMES.get(profile.type) or f"localhost/{profile.localhost_ref}"


_PROPAGATION = {
    "private": pb.PROPAGATION_PRIVATE,
    "host-to-container": pb.PROPAGATION_HOST_TO_CONTAINER,
    "bidirectional": pb.PROPAGATION_BIDIRECTIONAL,
}


def _container_linux(sc: ContainerSecuritySpec | None, namespaces: NamespaceSpec) -> Any:
    """The kubelet always sends the namespaces; the rest when the pod has a security context."""
    out = pb.LinuxContainerSecurityContext(namespace_options=_namespace_option(namespaces))
    if sc is not None:
        if sc.run_as_user is not None:
            out.run_as_user.value = sc.run_as_user
        if sc.run_as_group is not None:
            out.run_as_group.value = sc.run_as_group
        out.run_as_username = sc.run_as_username
        out.supplemental_groups.extend(sc.supplemental_groups)
        out.privileged = sc.privileged
        out.readonly_rootfs = sc.readonly_rootfs
        out.capabilities.add_capabilities.extend(sc.add_capabilities)
        out.capabilities.drop_capabilities.extend(sc.drop_capabilities)
        out.no_new_privs = sc.no_new_privs
        out.masked_paths.extend(sc.masked_paths)
        out.readonly_paths.extend(sc.readonly_paths)
        _container_profiles(out, sc)
    return pb.LinuxContainerConfig(security_context=out)


def _container_profiles(out: Any, sc: ContainerSecuritySpec) -> None:
    """Seccomp, AppArmor and the SELinux label of a container's security context."""
    if sc.seccomp is not None:
        out.seccomp.CopyFrom(_seccomp(sc.seccomp))
    if sc.apparmor is not None:
        out.apparmor.CopyFrom(_seccomp(sc.apparmor))
        out.apparmor_profile = _apparmor_name(sc.apparmor)
    if sc.selinux is not None:
        out.selinux_options.CopyFrom(_selinux(sc.selinux))


def _container_resources(r: ContainerResources) -> Any:
    return pb.LinuxContainerResources(
        cpu_shares=r.cpu_shares,
        cpu_quota=r.cpu_quota,
        cpu_period=r.cpu_period,
        memory_limit_in_bytes=r.memory_limit_in_bytes,
        oom_score_adj=r.oom_score_adj,
        unified=dict(r.unified),
    )


def _optional_resources(r: ContainerResources | None) -> Any:
    return _container_resources(r) if r is not None else None


def _container_config(spec: ContainerSpec, sandbox: NamespaceSpec = NamespaceSpec()) -> Any:
    """``sandbox``: the sandbox's namespaces, the container's unless it has its own."""
    config = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=spec.name, attempt=spec.attempt),
        image=pb.ImageSpec(image=spec.image),
        command=list(spec.command),
        args=list(spec.args),
        working_dir=spec.working_dir,
        envs=[pb.KeyValue(key=k, value=v) for k, v in spec.env],
        labels=dict(spec.labels),
        annotations=dict(spec.annotations),
        log_path=spec.log_path,
        mounts=[
            pb.Mount(
                container_path=m.container_path,
                host_path=m.host_path,
                readonly=m.readonly,
                propagation=_PROPAGATION[m.propagation],
            )
            for m in spec.mounts
        ],
        linux=_container_linux(spec.security, spec.namespaces or sandbox),
        stdin=spec.stdin,
        stdin_once=spec.stdin_once,
        tty=spec.tty,
    )
    if spec.resources is not None:
        config.linux.resources.CopyFrom(_container_resources(spec.resources))
    return config
