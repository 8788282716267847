"""A private containerd for tests and development, with local images only.

Everything lives under one base directory (default ``/tmp/pkletd-ctr``)::

    config.toml        containerd config (version 2): runtime handlers ``runc`` (the
                       default) and ``runc-test`` (the same runc, for RuntimeClass tests)
    containerd.sock    gRPC socket (CRI + containerd API); ``.ttrpc`` beside it
    containerd.log     containerd's stdout/stderr
    containerd.pid     pid of the running containerd
    root/ state/       containerd root and state (state/runc is runc's root,
                       state/.../netns holds the pods' network namespaces)
    net.d/             CNI config: bridge ``pkletd0``, 10.88.0.0/16, portmap
    certs.d/           registry hosts (``<host:port>/hosts.toml``, read at each pull):
                       ``allow_plain_http`` adds a test registry served over HTTP
    image-cache/       OCI archives built by ``images.py``

The system containerd (``/etc/containerd``, ``/run/containerd/containerd.sock``)
is never used. Shared by all instances on the machine: the bridge ``pkletd0``
and its host-local IPAM state in ``/run/pkletd-harness/cni-ipam`` (so two
instances never hand out the same pod IP), and the shim socket directory
``/run/containerd/s``, which containerd 1.6 hard-codes (names there are hashed
from our socket address, so they do not collide). Pods without a cgroup parent
land in the ``k8s.io`` cgroup, removed by ``stop()`` once empty; pkletd's pods are under
the shared ``/kubepods``, and ``remove_all_pods`` removes the cgroups of the pods it removes.

CLI, from the repository root::

    .venv/bin/python tests/harness/containerd.py up [--dir D]    # start detached
    .venv/bin/python tests/harness/containerd.py down [--dir D]  # stop and clean up
    .venv/bin/python tests/harness/containerd.py install         # apt-get what is missing
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `tests.harness` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import grpc  # noqa: E402
from cri_api.v1 import api_pb2, api_pb2_grpc  # noqa: E402

from tests.harness.images import (  # noqa: E402
    ALL_IMAGES,
    CRI_NAMESPACE,
    HOST_BUSYBOX,
    HOST_CATATONIT,
    PAUSE_IMAGE,
    ImageImportError,
    import_images,
)

DEFAULT_BASE_DIR = Path("/tmp/pkletd-ctr")
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_BRIDGE = "pkletd0"
CNI_NETWORK = "pkletd"
TEST_HANDLER = "runc-test"  # a second runtime handler, for pods of a RuntimeClass
POD_SUBNET = "10.88.0.0/16"
# host-local IPAM state is shared by all harness instances (they share the bridge
# and subnet, so they must not hand out the same address); tmpfs, like the bridge.
CNI_IPAM_DIR = Path("/run/pkletd-harness/cni-ipam")
SHIM_SOCKET_DIR = Path("/run/containerd/s")
POD_CGROUP_PARENTS = ("kubepods", "kubepods/burstable", "kubepods/besteffort")  # pkletd's
REGISTRY_BIN = Path("/usr/bin/docker-registry")  # the image pull tests' registry (registry.py)
PROMETHEUS_BIN = Path("/usr/bin/prometheus")  # the scrape test's server (prometheus.py)
PROMTOOL_BIN = Path("/usr/bin/promtool")
# Debian starts these as services; the tests run their own Prometheus on a free port.
SERVICES_OFF = ("prometheus", "prometheus-node-exporter")
APT_PACKAGES = (
    "containerd",
    "runc",
    "containernetworking-plugins",
    "catatonit",
    "busybox-static",
    "docker-registry",
    "prometheus",
    "dbus",  # dbus-daemon: the private system bus of the graceful shutdown tests
)

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
_POLL_INTERVAL = 0.05
_MAX_UNIX_PATH = 107  # sun_path is 108 bytes including the NUL


class HarnessError(RuntimeError):
    """The private containerd could not be installed, started, cleaned or stopped."""


# --------------------------------------------------------------------------- helpers


def wait_for(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    detail: Callable[[], str] | None = None,
) -> None:
    """Poll ``predicate`` until it is true; raise ``HarnessError`` naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            extra = f"\n{detail()}" if detail is not None else ""
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}{extra}")
        time.sleep(_POLL_INTERVAL)


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a text file, or a note that it is unreadable."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"({path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def cri_target(address: str) -> str:
    """A gRPC target for a socket given as ``unix://...`` or as a raw path."""
    return address if address.startswith("unix:") else f"unix://{address}"


# --------------------------------------------------------------------------- installation


def missing_dependencies() -> list[str]:
    """Host binaries the harness needs that are not installed."""
    missing = [
        cmd
        for cmd in ("containerd", "ctr", "containerd-shim-runc-v2", "runc", "dbus-daemon")
        if shutil.which(cmd) is None
    ]
    files = [CNI_BIN_DIR / p for p in ("bridge", "host-local", "loopback", "portmap")]
    files += [HOST_CATATONIT, HOST_BUSYBOX, REGISTRY_BIN, PROMETHEUS_BIN, PROMTOOL_BIN]
    missing += [str(f) for f in files if not os.access(f, os.X_OK)]
    return missing


def ensure_installed() -> None:
    """Install containerd, runc, CNI plugins, catatonit, busybox-static, docker-registry,
    prometheus and dbus with apt if missing; the services apt enables are turned off."""
    missing = missing_dependencies()
    if not missing:
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", *APT_PACKAGES]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            output = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            failed = f"`{' '.join(cmd)}` exited {proc.returncode}"
            raise HarnessError(f"missing {', '.join(missing)}; {failed}:\n{output}")
    if shutil.which("systemctl"):
        subprocess.run(["systemctl", "disable", "--now", *SERVICES_OFF], capture_output=True,
                       timeout=120)  # fmt: skip
    still = missing_dependencies()
    if still:
        raise HarnessError(f"still missing after apt-get install: {', '.join(still)}")


# --------------------------------------------------------------------------- CRI client


@contextlib.contextmanager
def cri_channel(address: str) -> Iterator[grpc.Channel]:
    """A gRPC channel to the CRI socket, closed on exit."""
    channel = grpc.insecure_channel(cri_target(address))
    try:
        yield channel
    finally:
        channel.close()


def runtime_service(channel: grpc.Channel) -> Any:
    return api_pb2_grpc.RuntimeServiceStub(channel)


def image_service(channel: grpc.Channel) -> Any:
    return api_pb2_grpc.ImageServiceStub(channel)


def list_pod_sandboxes(address: str) -> list[Any]:
    """All pod sandboxes (``api_pb2.PodSandbox``) known to the CRI at ``address``."""
    with cri_channel(address) as channel:
        resp = runtime_service(channel).ListPodSandbox(api_pb2.ListPodSandboxRequest(), timeout=30)
    return list(resp.items)


def list_containers(address: str) -> list[Any]:
    """All containers (``api_pb2.Container``) known to the CRI at ``address``."""
    with cri_channel(address) as channel:
        resp = runtime_service(channel).ListContainers(api_pb2.ListContainersRequest(), timeout=30)
    return list(resp.containers)


def _unless_gone(call: Callable[..., Any], request: Any, timeout: float) -> None:
    """Make a CRI call, ignoring NOT_FOUND (removed meanwhile, e.g. by the agent under test)."""
    try:
        call(request, timeout=timeout)
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            raise


def remove_all_pods(address: str, timeout: float = 60.0) -> None:
    """Stop and remove every container and pod sandbox, and the pods' (empty) pod cgroups;
    raise if a container or sandbox is left."""
    uids: set[str] = set()
    with cri_channel(address) as channel:
        rt = runtime_service(channel)
        for ctr in rt.ListContainers(api_pb2.ListContainersRequest(), timeout=30).containers:
            stop = api_pb2.StopContainerRequest(container_id=ctr.id, timeout=0)
            _unless_gone(rt.StopContainer, stop, timeout)
            remove = api_pb2.RemoveContainerRequest(container_id=ctr.id)
            _unless_gone(rt.RemoveContainer, remove, timeout)
        for pod in rt.ListPodSandbox(api_pb2.ListPodSandboxRequest(), timeout=30).items:
            uids.add(pod.metadata.uid)
            _unless_gone(
                rt.StopPodSandbox, api_pb2.StopPodSandboxRequest(pod_sandbox_id=pod.id), timeout
            )
            _unless_gone(
                rt.RemovePodSandbox, api_pb2.RemovePodSandboxRequest(pod_sandbox_id=pod.id), timeout
            )
    # pkletd removes a pod's cgroup when it terminates the pod; these were removed behind
    # its back (a stopped pkletd leaves its pods running). By uid: other daemons' are not ours.
    remove_pod_cgroups(uids)
    left = [p.id for p in list_pod_sandboxes(address)] + [c.id for c in list_containers(address)]
    if left:
        raise HarnessError(f"pods/containers still present after cleanup: {', '.join(left)}")


def cri_ready(address: str) -> bool:
    """True once the CRI answers ``Version`` and reports runtime and network ready."""
    try:
        with cri_channel(address) as channel:
            rt = runtime_service(channel)
            rt.Version(api_pb2.VersionRequest(), timeout=2)
            status = rt.Status(api_pb2.StatusRequest(), timeout=2).status
    except grpc.RpcError:
        return False
    conditions = {c.type: c.status for c in status.conditions}
    return bool(conditions.get("RuntimeReady") and conditions.get("NetworkReady"))


def cri_has_images(address: str, images: tuple[str, ...] = ALL_IMAGES) -> bool:
    """True once the CRI image service knows every image in ``images``."""
    with cri_channel(address) as channel:
        svc = image_service(channel)
        for name in images:
            req = api_pb2.ImageStatusRequest(image=api_pb2.ImageSpec(image=name))
            if not svc.ImageStatus(req, timeout=10).image.id:
                return False
    return True


# --------------------------------------------------------------------------- processes & mounts


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _parent_pid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        children.setdefault(_parent_pid(pid), []).append(pid)
    out: list[int] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


@dataclass(frozen=True)
class Shim:
    """A running ``containerd-shim-runc-v2`` (one per pod sandbox)."""

    pid: int
    namespace: str
    id: str

    def socket(self, containerd_socket: Path) -> Path:
        """The shim's own socket, as containerd 1.6 names it (hard-coded under /run)."""
        key = f"{containerd_socket}/{self.namespace}/{self.id}".encode()
        return SHIM_SOCKET_DIR / hashlib.sha256(key).hexdigest()


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1] if name in cmd[:-1] else ""


def find_shims(socket_path: Path) -> list[Shim]:
    """Shims serving the containerd at ``socket_path`` (found by their ``-address``)."""
    shims = []
    for pid in _all_pids():
        cmd = _cmdline(pid)
        if cmd and "shim" in Path(cmd[0]).name and _flag(cmd, "-address") == str(socket_path):
            shims.append(Shim(pid, _flag(cmd, "-namespace"), _flag(cmd, "-id")))
    return shims


def release_ip_reservations(sandbox_ids: set[str]) -> None:
    """Drop host-local IPAM reservations held by ``sandbox_ids`` (after a CNI DEL never ran)."""
    for entry in (CNI_IPAM_DIR / CNI_NETWORK).glob("*.*.*.*"):
        with contextlib.suppress(OSError):
            if entry.read_text().split()[0] in sandbox_ids:
                entry.unlink()


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def mounts_under(base: Path) -> list[str]:
    """Mount points at or below ``base``, deepest first."""
    prefix = str(base.resolve())
    points: list[str] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def unmount_all(base: Path) -> None:
    """Lazily unmount everything at or below ``base``; raise if something stays mounted."""
    for _ in range(5):
        points = mounts_under(base)
        if not points:
            return
        for point in points:
            subprocess.run(["umount", "--lazy", point], capture_output=True, timeout=30)
    left = mounts_under(base)
    if left:
        raise HarnessError(f"could not unmount under {base}: {', '.join(left)}")


def remove_unused_bridge(name: str = CNI_BRIDGE) -> None:
    """Delete the CNI bridge if no interface is attached (another instance may still use it)."""
    ports = Path(f"/sys/class/net/{name}/brif")
    if ports.is_dir() and not any(ports.iterdir()) and shutil.which("ip"):
        subprocess.run(["ip", "link", "delete", name], capture_output=True, timeout=30)


def remove_pod_cgroups(uids: Iterable[str]) -> None:
    """Remove these pods' cgroups, which runc leaves behind as parents, where empty."""
    for uid in sorted(u for u in uids if u):
        for parent in POD_CGROUP_PARENTS:
            remove_empty_cgroups(f"{parent}/pod{uid}")


def remove_empty_cgroups(name: str) -> None:
    """Remove the (cgroup v1) parent ``name`` that runc leaves behind, where it is empty."""
    root = Path("/sys/fs/cgroup")
    for group in sorted(root.glob(f"*/{name}")):
        # os.walk skips what vanishes mid-walk (another runtime may be removing pods).
        dirs = [Path(top) / d for top, subdirs, _ in os.walk(group) for d in subdirs]
        dirs.sort(key=lambda d: len(d.parts))
        for d in [*reversed(dirs), group]:
            with contextlib.suppress(OSError):  # busy: still in use by someone
                d.rmdir()


# --------------------------------------------------------------------------- config


def containerd_config(base: Path, sock: Path) -> str:
    """The containerd config (version 2) for a private instance rooted at ``base``."""
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    runc = f"{cri[:-1]}.containerd.runtimes.runc]"
    runc_test = f"{cri[:-1]}.containerd.runtimes.{TEST_HANDLER}]"
    return f"""\
version = 2
root = "{base / "root"}"
state = "{base / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{sock}"
  tcp_address = ""

[ttrpc]
  address = "{sock}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{base / "opt"}"

{cri}
  sandbox_image = "{PAUSE_IMAGE}"
  # Required here: the runtime may not lower oom_score_adj below the daemon's,
  # otherwise every sandbox fails with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_tls_streaming = false

{cri[:-1]}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

{runc}
  runtime_type = "io.containerd.runc.v2"

{runc[:-1]}.options]
  SystemdCgroup = false
  Root = "{base / "state" / "runc"}"

{runc_test}
  runtime_type = "io.containerd.runc.v2"

{runc_test[:-1]}.options]
  SystemdCgroup = false
  Root = "{base / "state" / "runc"}"

{cri[:-1]}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{base / "net.d"}"
  max_conf_num = 1

{cri[:-1]}.registry]
  config_path = "{base / "certs.d"}"
"""


def cni_conflist() -> dict[str, Any]:
    """Bridge network ``pkletd0`` on 10.88.0.0/16 with port mapping support."""
    return {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": CNI_BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(CNI_IPAM_DIR),
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


# --------------------------------------------------------------------------- the daemon


class PrivateContainerd:
    """A containerd (with CRI) of its own under ``base_dir``; see the module doc."""

    def __init__(self, base_dir: Path = DEFAULT_BASE_DIR) -> None:
        self.base_dir = Path(base_dir).absolute()
        self._proc: subprocess.Popen[bytes] | None = None
        if len(str(self.socket_path)) + len(".ttrpc") > _MAX_UNIX_PATH:
            raise HarnessError(f"socket path {self.socket_path} is too long for a unix socket")

    # paths --------------------------------------------------------------
    @property
    def socket_path(self) -> Path:
        return self.base_dir / "containerd.sock"

    @property
    def address(self) -> str:
        """The CRI/gRPC address, ``unix:///.../containerd.sock``."""
        return f"unix://{self.socket_path}"

    @property
    def ctr_address(self) -> str:
        """The raw socket path, as ``ctr --address`` takes it."""
        return str(self.socket_path)

    @property
    def config_path(self) -> Path:
        return self.base_dir / "config.toml"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "containerd.log"

    @property
    def pid_path(self) -> Path:
        return self.base_dir / "containerd.pid"

    @property
    def image_cache_dir(self) -> Path:
        return self.base_dir / "image-cache"

    def allow_plain_http(self, host: str) -> None:
        """Let the CRI pull from the registry at ``host`` (``127.0.0.1:PORT``) over plain HTTP."""
        if "config_path" not in self.config_path.read_text():  # a kept daemon, started before
            raise HarnessError(f"containerd under {self.base_dir} reads no certs.d: restart it")
        hosts = self.base_dir / "certs.d" / host / "hosts.toml"
        hosts.parent.mkdir(parents=True, exist_ok=True)
        hosts.write_text(f'server = "http://{host}"\n')

    def require_handler(self, handler: str = TEST_HANDLER) -> None:
        """Fail clearly if the running daemon was started without this runtime handler."""
        if f".runtimes.{handler}]" not in self.config_path.read_text():  # a kept daemon
            raise HarnessError(
                f"containerd under {self.base_dir} has no runtime handler {handler!r}: stop it "
                f"(containerd.py down --dir {self.base_dir}) so it restarts with the current config"
            )

    # state --------------------------------------------------------------
    def pid(self) -> int | None:
        """Pid of this instance's containerd if it is running, else None."""
        if self._proc is not None:
            # Our own child: trust Popen. Right after spawning, /proc/PID/cmdline can
            # still read empty (the vfork'ed parent resumes before exec sets argv up).
            return self._proc.pid if self._proc.poll() is None else None
        try:
            pid = int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None
        cmd = _cmdline(pid)
        if not pid_alive(pid) or str(self.config_path) not in cmd:
            return None
        return pid

    def is_running(self) -> bool:
        return self.pid() is not None

    def _failure(self, message: str) -> HarnessError:
        return HarnessError(f"{message}\nlast lines of {self.log_path}:\n{tail(self.log_path)}")

    # start --------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> bool:
        """Start containerd and import the images; return False if it was already running."""
        if self.is_running():
            self._wait_ready(timeout)
            return False
        self._write_config()
        self._spawn()
        try:
            self._wait_ready(timeout)
            import_images(self.ctr_address, self.image_cache_dir)
            wait_for(
                lambda: cri_has_images(self.address), timeout, "CRI to list the imported images"
            )
        except Exception:
            self._terminate()
            raise
        return True

    def _write_config(self) -> None:
        net_d = self.base_dir / "net.d"
        net_d.mkdir(parents=True, exist_ok=True)
        for stale in net_d.iterdir():
            stale.unlink()
        (net_d / "10-pkletd.conflist").write_text(json.dumps(cni_conflist(), indent=2))
        self.config_path.write_text(containerd_config(self.base_dir, self.socket_path))

    def _spawn(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                ["containerd", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        self.pid_path.write_text(f"{self._proc.pid}\n")

    def _wait_ready(self, timeout: float) -> None:
        """Poll until the CRI is ready; fail early, with the log, if containerd exits."""
        exited = False

        def ready_or_exited() -> bool:
            nonlocal exited
            exited = not self.is_running()
            return exited or cri_ready(self.address)

        try:
            wait_for(ready_or_exited, timeout, f"containerd CRI on {self.address} to become ready")
        except HarnessError as exc:
            raise self._failure(f"containerd did not come up: {exc}") from None
        if exited:
            code = self._proc.poll() if self._proc is not None else None
            raise self._failure(f"containerd did not come up: it exited (status {code})")

    def restart(self, timeout: float = START_TIMEOUT) -> None:
        """Stop the daemon (SIGTERM) and start it again on the same state, as a service
        restart does: the shims, and so the pods' containers, keep running throughout."""
        self.stop_daemon(timeout)
        self._spawn()
        self._wait_ready(timeout)

    # stop ---------------------------------------------------------------
    def stop_daemon(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop containerd alone (SIGTERM), as a service stop does: its shims, and so the
        pods' containers, keep running; ``start()`` (or the CLI's ``up``) brings it back."""
        self._terminate(timeout)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Remove all pods, stop containerd and its shims, and unmount everything under base_dir."""
        errors: list[str] = []
        if self.is_running():
            try:
                remove_all_pods(self.address)
            except (grpc.RpcError, HarnessError) as exc:
                errors.append(f"removing pods failed: {exc}")
        self._terminate(timeout)
        self._kill_stray_shims(timeout)
        try:
            unmount_all(self.base_dir)
        except HarnessError as exc:
            errors.append(str(exc))
        remove_unused_bridge()
        remove_empty_cgroups(CRI_NAMESPACE)
        if errors:
            raise self._failure("; ".join(errors))

    def _terminate(self, timeout: float = STOP_TIMEOUT) -> None:
        pid = self.pid()
        if pid is not None:
            _kill(pid, signal.SIGTERM)
            try:
                wait_for(lambda: not self._alive(pid), timeout, f"containerd {pid} to exit")
            except HarnessError:
                _kill(pid, signal.SIGKILL)
                wait_for(lambda: not self._alive(pid), timeout, f"containerd {pid} to die")
        if self._proc is not None:
            self._proc.wait(timeout=timeout)
            self._proc = None
        with contextlib.suppress(FileNotFoundError):
            self.pid_path.unlink()

    def _alive(self, pid: int) -> bool:
        if self._proc is not None and self._proc.pid == pid:
            return self._proc.poll() is None
        return pid_alive(pid)

    def _kill_stray_shims(self, timeout: float) -> None:
        """SIGKILL shims (and their containers) left behind by pods that were not removed."""
        shims = find_shims(self.socket_path)
        for shim in shims:
            for pid in [*_descendants(shim.pid), shim.pid]:
                _kill(pid, signal.SIGKILL)
        pids = [shim.pid for shim in shims]
        wait_for(lambda: not any(pid_alive(p) for p in pids), timeout, "stray shims to die")
        for shim in shims:
            with contextlib.suppress(FileNotFoundError):
                shim.socket(self.socket_path).unlink()
        release_ip_reservations({shim.id for shim in shims})


# --------------------------------------------------------------------------- CLI


def _cli_up(base: Path) -> int:
    ensure_installed()
    daemon = PrivateContainerd(base)
    t0 = time.monotonic()
    started = daemon.start()
    how = f"started in {time.monotonic() - t0:.1f}s" if started else "already running"
    print(f"containerd {how} (pid {daemon.pid()}), log {daemon.log_path}", file=sys.stderr)
    print(daemon.address)
    return 0


def _cli_down(base: Path) -> int:
    PrivateContainerd(base).stop()
    print(f"containerd under {base} stopped", file=sys.stderr)
    return 0


def _cli_install(base: Path) -> int:
    ensure_installed()
    return 0


_COMMANDS: dict[str, Callable[[Path], int]] = {
    "up": _cli_up,
    "down": _cli_down,
    "install": _cli_install,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Private containerd for pkletd tests.")
    parser.add_argument(
        "command",
        choices=sorted(_COMMANDS),
        help="up: start detached (idempotent); down: stop and clean up; "
        "install: apt-get the system packages if missing",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_BASE_DIR,
        help=f"base directory (default {DEFAULT_BASE_DIR})",
    )
    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args.dir)
    except (HarnessError, ImageImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
