"""Running the real pkletd in tests: a process, its dirs, manifests and questions.

``Pkletd`` starts ``.venv/bin/pkletd start`` (or another ``command``) against the
test containerd with a private run dir, log dir, root dir and manifest dir, and
answers through the real control socket. ``wait_for`` polls a condition with a
deadline: tests never sleep to synchronise.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pkletd.supervisor import cli

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
PKLETD = REPO / ".venv" / "bin" / "pkletd"
NODE = "testnode"
BUSYBOX = "pkletd.local/busybox:1"


def wait_for(
    what: str, check: Callable[[], T | None], timeout: float = 30.0, every: float = 0.05
) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (ConnectionError, OSError, LookupError, ValueError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range (32768 and up): an
    outgoing connection never takes it before the test's server binds it."""
    while True:
        port = random.randrange(20000, 32768)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port


def pod_manifest(
    name: str,
    command: str = "trap 'exit 0' TERM; while true; do sleep 1; done",
    *,
    restart_policy: str = "Always",
    host_network: bool = True,
    grace: int = 1,
    containers: int = 1,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"test": name}},
        "spec": {
            "hostNetwork": host_network,
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {"name": f"c{i}", "image": BUSYBOX, "command": ["sh", "-c", command]}
                for i in range(containers)
            ],
        },
    }


def pkletd_processes(session: int | None = None) -> dict[int, str]:
    """Processes titled ``pkletd: ...`` (in one session, if given), by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                in_session = session is None or os.getsid(int(entry.name)) == session
            except OSError:
                continue
            if title.startswith("pkletd: ") and in_session:
                found[int(entry.name)] = title
    return found


class Pkletd:
    def __init__(
        self,
        endpoint: str,
        heartbeat_timeout: str = "10s",
        node: str = NODE,
        base: Path | None = None,
    ) -> None:
        """``base`` holds its dirs (default: a new one under /tmp)."""
        self.node = node
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        self.base = base or Path(tempfile.mkdtemp(prefix="pk-", dir="/tmp"))
        self.run_dir = self.base / "run"
        self.log_dir = self.base / "log"
        self.root_dir = self.base / "root"
        self.pod_logs = self.base / "pods"
        self.manifests = self.base / "manifests"
        self.manifests.mkdir(exist_ok=True)
        self.endpoint = endpoint
        self.healthz_port = free_port()
        self.read_only_port = free_port()
        self.port = free_port()  # the kubelet API's (10250 is one per host)
        self.heartbeat_timeout = heartbeat_timeout
        self.extra_args: list[str] = []  # more flags for `pkletd start`
        self.env: dict[str, str] = {}  # more environment for `pkletd start`
        self.config = self.base / "kubelet-config.yaml"
        # `pkletd start --config ...`; a test may run another install's pkletd instead
        self.command = [str(PKLETD), "start", "--config", str(self.config)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.session = -1
        self.write_config()

    def write_config(self, **fields: Any) -> None:
        doc = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "staticPodPath": str(self.manifests),
            "fileCheckFrequency": "20s",
            "containerRuntimeEndpoint": self.endpoint,
            "podLogsDir": str(self.pod_logs),
            "readOnlyPort": self.read_only_port,
            "healthzPort": self.healthz_port,
            "port": self.port,
            **fields,
        }
        self.config.write_text(json.dumps(doc, indent=2))

    def args(self) -> list[str]:
        return [
            *self.command,
            "--run-dir",
            str(self.run_dir),
            "--log-dir",
            str(self.log_dir),
            "--root-dir",
            str(self.root_dir),
            "--hostname-override",
            self.node,
            "--worker-heartbeat-timeout",
            self.heartbeat_timeout,
            *self.extra_args,
        ]

    def start(self, wait: bool = True) -> Pkletd:
        out = open(self.base / "stderr.log", "ab")  # noqa: SIM115 (lives as long as the process)
        self.proc = subprocess.Popen(
            self.args(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **self.env},
        )
        out.close()
        self.session = self.proc.pid  # the leader of its own session: workers inherit it
        if wait:
            wait_for("all workers running", self.all_running)
        return self

    # --- questions -------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return cli.request(str(self.run_dir), {"command": "status"})

    def events(self) -> list[dict[str, Any]]:
        """The recent events, oldest first, as ``pkletd status --json`` shows them."""
        reply = cli.request(str(self.run_dir), {"command": "status", "events": True})
        return list(reply["events"])

    def workers(self) -> dict[str, dict[str, Any]]:
        return {w["name"]: w for w in self.status()["workers"]}

    def all_running(self) -> bool:
        return all(w["state"] == "running" for w in self.workers().values())

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in self.status()["pods"]}

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.pods().get(f"{name}-{self.node}")

    def join(self, kubeconfig: Path) -> Pkletd:
        """Run as a node of the cluster this kubeconfig (with the node's credentials) names."""
        self.extra_args += ["--kubeconfig", str(kubeconfig)]
        return self

    def join_cluster(self, server: Any) -> Pkletd:
        """Join the test API server with the node's credentials (``system:node:<node>``)."""
        return self.join(
            server.kubeconfig(user=f"system:node:{self.node}", groups=["system:nodes"])
        )

    def wait_api_pod(self, name: str, phase: str = "Running", timeout: float = 30.0) -> Any:
        """An API pod (named as in the API) as ``pkletd status`` shows it, in ``phase``."""

        def check() -> dict[str, Any] | None:
            pod = self.pods().get(name)
            return pod if pod is not None and pod["phase"] == phase else None

        return wait_for(f"API pod {name} {phase} on {self.node}", check, timeout)

    def wait_phase(self, name: str, phase: str, timeout: float = 30.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            pod = self.pod(name)
            return pod if pod is not None and pod["phase"] == phase else None

        return wait_for(f"pod {name} {phase}", check, timeout)

    def wait_running(self, name: str, timeout: float = 30.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            pod = self.pod(name)
            ok = pod is not None and pod["phase"] == "Running"
            return pod if ok and all(c["state"] == "running" for c in pod["containers"]) else None

        return wait_for(f"pod {name} running", check, timeout)

    def log(self, process: str = "supervisor") -> str:
        path = self.log_dir / f"{process}.log"
        return path.read_text() if path.exists() else ""

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PKLETD), *args, "--run-dir", str(self.run_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    # --- manifests -------------------------------------------------------------

    def put(self, name: str, manifest: dict[str, Any] | str) -> Path:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        tmp = self.manifests / f".{name}.tmp"
        tmp.write_text(text)
        path = self.manifests / f"{name}.yaml"
        tmp.rename(path)
        return path

    def remove(self, name: str) -> None:
        (self.manifests / f"{name}.yaml").unlink()

    # --- process ---------------------------------------------------------------

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def processes(self) -> dict[int, str]:
        """This pkletd's processes still alive (a restarted one is a new session)."""
        return pkletd_processes(self.session)

    def close(self) -> None:
        self.stop()
        wait_for("no pkletd process left", lambda: not self.processes(), timeout=15)
        if os.environ.get("PKLETD_KEEP_TMP") != "1":
            from tests.harness.containerd import unmount_all

            unmount_all(self.base)  # memory-backed volumes of pods left running (stop keeps them)
            shutil.rmtree(self.base, ignore_errors=True)


def join(pkletd: Pkletd, apiserver: Any, **fields: Any) -> Pkletd:
    """pkletd as a node of the test API server whose kubelet API trusts the cluster CA
    (so the API server's kubelet-client certificate, and ours, get in) and is found at
    127.0.0.1:<port>, started; ``fields`` are more KubeletConfiguration fields."""
    authentication = {"x509": {"clientCAFile": str(apiserver.ca_path)}}
    pkletd.write_config(authentication=authentication, **fields)
    pkletd.extra_args += ["--node-ip", "127.0.0.1"]
    return pkletd.join_cluster(apiserver).start()


def dump_logs(agent: Pkletd) -> None:
    for path in [agent.base / "stderr.log", *sorted(agent.log_dir.glob("*.log"))]:
        if not path.exists():
            continue
        sys.stderr.write(f"==== {path.name}\n{path.read_text()[-4000:]}\n")


def api_pod(agent: Pkletd, name: str) -> dict[str, Any] | None:
    """The pod as the read-only port's /pods serves it (status included)."""
    url = f"http://127.0.0.1:{agent.read_only_port}/pods"
    with urllib.request.urlopen(url, timeout=5) as reply:
        items = json.load(reply)["items"]
    found = [p for p in items if p["metadata"]["name"] == f"{name}-{NODE}"]
    return found[0] if found else None


def condition(pod: dict[str, Any] | None, kind: str) -> str:
    if pod is None:
        return ""
    return next((c["status"] for c in pod["status"]["conditions"] if c["type"] == kind), "")


def exec_in(agent: Pkletd, container_id: str, *command: str) -> str:
    """Run a command in a container through the CRI (ExecSync); its stdout."""
    from cri_api.v1 import api_pb2

    from tests.harness.containerd import cri_channel, runtime_service

    request = api_pb2.ExecSyncRequest(container_id=container_id, cmd=list(command), timeout=10)
    with cri_channel(agent.endpoint) as channel:
        reply = runtime_service(channel).ExecSync(request, timeout=20)
    if reply.exit_code != 0:
        raise AssertionError(f"{command} exited {reply.exit_code}: {reply.stderr.decode()}")
    return bytes(reply.stdout).decode()
