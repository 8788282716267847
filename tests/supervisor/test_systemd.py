"""etc/pkletd.service, and pkletd's side of systemd's notify protocol.

``systemd-analyze verify`` checks the unit offline (systemd is not PID 1 here):
it needs ExecStart's binary to exist, so the test verifies a copy whose
ExecStart points at the venv's console script; everything else is verbatim.

The end-to-end test plays systemd: it binds the NOTIFY_SOCKET datagram socket
with SO_PASSCRED (as systemd does, to enforce NotifyAccess=main), runs the real
``pkletd start`` against a runtime endpoint that does not exist, and reads the
datagrams with a deadline: READY=1, WATCHDOG=1 at WatchdogSec/2, and STOPPING=1
plus exit status 0 after SIGTERM.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pkletd.supervisor.notify import Notifier

from tests.systemd_unit import (
    CONFIG,
    INSTALL_PREFIX,
    exec_start,
    systemd_verify,
    unit_complaints,
    unit_settings,
    verifiable_copy,
)

ROOT = Path(__file__).resolve().parents[2]

WATCHDOG_USEC = 1_000_000  # systemd's WatchdogSec=1s: a WATCHDOG=1 every 0.5s
READY_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 30.0
UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def pkletd_binary() -> Path:
    for candidate in (ROOT / ".venv" / "bin" / "pkletd", Path(sys.executable).parent / "pkletd"):
        if os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("no pkletd console script next to the test interpreter")


# --------------------------------------------------------------------------- the unit


def venv_prefix() -> Path:
    """The venv holding the console script (ExecStart's install prefix, here)."""
    return pkletd_binary().parent.parent


def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    copy = verifiable_copy(tmp_path / "units", venv_prefix())
    result = systemd_verify(copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert unit_complaints(result, copy) == []


def test_verify_would_catch_a_bad_directive(tmp_path: Path) -> None:
    """The check above is not vacuous: verify reports typos (with exit status 0)."""
    copy = verifiable_copy(tmp_path / "units", venv_prefix(), extra="KillMod=mixed")
    result = systemd_verify(copy)
    assert any("KillMod" in line for line in unit_complaints(result, copy)), (
        result.stdout + result.stderr
    )


def test_unit_settings() -> None:
    got = unit_settings()

    def one(key: str) -> str:
        values = got.get(key, [])
        assert len(values) == 1, f"{key}: {values}"
        return values[0]

    assert one("Service.Type") == "notify"
    assert one("Service.NotifyAccess") == "main"
    assert exec_start() == [f"{INSTALL_PREFIX}/bin/pkletd", "start", "--config", CONFIG]
    assert one("Service.WatchdogSec") == "15s"
    assert one("Service.Restart") == "always"
    assert one("Service.KillMode") == "mixed"
    assert one("Service.RuntimeDirectory") == "pkletd"
    assert one("Service.RuntimeDirectoryMode") == "0700"
    assert one("Service.RuntimeDirectoryPreserve") == "yes"
    assert one("Service.LogsDirectory") == "pkletd"
    assert one("Unit.StartLimitIntervalSec") == "0"
    assert one("Install.WantedBy") == "multi-user.target"
    assert "containerd.service" in one("Unit.After").split()
    assert "containerd.service" in one("Unit.Wants").split()
    restart = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)", one("Service.RestartSec"))
    assert restart is not None
    assert float(restart[1]) / (1000 if restart[2] == "ms" else 1) <= 1.0
    assert re.fullmatch(r"\d+s", one("Service.TimeoutStopSec"))


# --------------------------------------------------------------------------- Notifier


def datagram_socket(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    return sock


def receive(sock: socket.socket, timeout: float = 5.0) -> bytes:
    ready, _, _ = select.select([sock], [], [], timeout)
    assert ready, "no datagram"
    return sock.recv(4096)


def test_notifier_sends_to_a_path_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with datagram_socket(path) as sock:
        Notifier({"NOTIFY_SOCKET": path}).send("READY=1")
        assert receive(sock) == b"READY=1"


def test_notifier_sends_to_an_abstract_socket() -> None:
    name = f"pkletd-test-{uuid.uuid4().hex}"
    with datagram_socket("\0" + name) as sock:
        Notifier({"NOTIFY_SOCKET": "@" + name}).send("WATCHDOG=1")
        assert receive(sock) == b"WATCHDOG=1"


def test_notifier_without_notify_socket_does_nothing() -> None:
    notifier = Notifier({})
    notifier.send("READY=1")  # nothing to send to; must not raise
    assert notifier.watchdog_interval == 0.0


def test_notifier_logs_when_systemd_is_gone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}).send("READY=1")
    assert "sd_notify failed" in caplog.text


@pytest.mark.parametrize(
    ("environ", "interval"),
    [
        ({"WATCHDOG_USEC": "1000000"}, 0.5),
        ({"WATCHDOG_USEC": "15000000", "WATCHDOG_PID": str(os.getpid())}, 7.5),
        ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid() + 1)}, 0.0),
        ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}, 0.0),
        ({"WATCHDOG_USEC": "0"}, 0.0),
        ({"WATCHDOG_USEC": "bogus"}, 0.0),
        ({}, 0.0),
    ],
)
def test_notifier_watchdog_interval(environ: dict[str, str], interval: float) -> None:
    """WatchdogSec/2, and no pings at all when WATCHDOG_PID names another process."""
    notifier = Notifier({"NOTIFY_SOCKET": "/nonexistent/notify.sock", **environ})
    assert notifier.watchdog_interval == pytest.approx(interval)


# --------------------------------------------------------------------------- real pkletd


@dataclass
class Notification:
    at: float
    pid: int
    fields: dict[str, str]


@dataclass
class FakeSystemd:
    """The receiving end of NOTIFY_SOCKET, and the pkletd it started."""

    sock: socket.socket
    run_dir: Path
    log_file: Path
    proc: subprocess.Popen[bytes] | None = None
    seen: list[Notification] = field(default_factory=list)

    def start(self, tmp_path: Path) -> subprocess.Popen[bytes]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            healthz_port = probe.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "WATCHDOG_"))}
        env |= {"NOTIFY_SOCKET": self.sock.getsockname(), "WATCHDOG_USEC": str(WATCHDOG_USEC)}
        argv = [
            str(pkletd_binary()),
            "start",
            "--run-dir", str(self.run_dir / "run"),
            "--log-dir", str(tmp_path / "log"),
            "--root-dir", str(tmp_path / "root"),
            "--container-runtime-endpoint", "unix:///nonexistent.sock",
            "--healthz-port", str(healthz_port),
            "--read-only-port", "0",
        ]  # fmt: skip
        with self.log_file.open("wb") as out:
            # its own session: every process it forks is findable (and killable) by sid
            self.proc = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self.proc

    def next(self, deadline: float) -> Notification:
        """The next datagram, with the sender's pid from SCM_CREDENTIALS."""
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([self.sock], [], [], max(0.0, remaining))
        if not ready:
            pytest.fail(
                f"no notification within the deadline; seen={[n.fields for n in self.seen]}"
                f" exit={self.proc.poll() if self.proc else None}\n{self.log()}"
            )
        data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(UCRED.size))
        pid = 0
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = UCRED.unpack(payload[: UCRED.size])[0]
        fields = dict(
            line.partition("=")[::2] for line in data.decode().splitlines() if "=" in line
        )
        note = Notification(time.monotonic(), pid, fields)
        self.seen.append(note)
        return note

    def wait_for(self, key: str, value: str, deadline: float) -> Notification:
        while True:
            note = self.next(deadline)
            if note.fields.get(key) == value:
                return note

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def session_members(sid: int) -> list[tuple[int, str]]:
    """Live (non-zombie) processes in session ``sid``, with their command lines."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            members.append((int(entry.name), cmdline.replace(b"\0", b" ").decode().strip()))
    return members


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait (on pidfds, no polling) until the processes exit; returns those still alive."""
    alive = []
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                alive.append(pid)
        finally:
            os.close(fd)
    return alive


@pytest.fixture
def fake_systemd(tmp_path: Path) -> Iterator[FakeSystemd]:
    # a short dir under /tmp: the run dir's ipc:// socket paths must stay under 107 bytes
    short = Path(tempfile.mkdtemp(prefix="pkn-", dir="/tmp"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd = FakeSystemd(sock, short, tmp_path / "pkletd.out")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        sock.bind(str(short / "notify.sock"))
        yield systemd
    finally:
        sock.close()
        proc = systemd.proc
        if proc is not None:
            if proc.poll() is None:  # the test stopped early: ask nicely first
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=EXIT_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    pass
            # then SIGKILL whatever is left of its session (supervisor, fork server, workers)
            leftovers = [pid for pid, _ in session_members(proc.pid)]
            for pid in leftovers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            wait_gone(leftovers, timeout=10)
        shutil.rmtree(short, ignore_errors=True)
        if proc is not None:
            assert proc.returncode is not None, f"pkletd pid {proc.pid} survived SIGKILL"
            still = session_members(proc.pid)
            assert still == [], f"pkletd processes survived SIGKILL: {still}"


def test_pkletd_speaks_sd_notify(fake_systemd: FakeSystemd, tmp_path: Path) -> None:
    proc = fake_systemd.start(tmp_path)

    ready = fake_systemd.wait_for("READY", "1", time.monotonic() + READY_TIMEOUT_S)
    assert ready.pid == proc.pid, "READY=1 must come from the main pid (NotifyAccess=main)"

    # WatchdogSec=1s: a ping every 0.5s, never as late as 1s (systemd would abort us)
    interval = WATCHDOG_USEC / 1e6
    pings = []
    last = ready.at
    while len(pings) < 3:
        note = fake_systemd.next(last + 3 * interval)
        assert note.pid == proc.pid, f"{note.fields} from pid {note.pid}, not the main pid"
        assert "READY" not in note.fields, "READY=1 sent twice"
        if note.fields.get("WATCHDOG") == "1":
            pings.append(note.at)
            last = note.at
    gaps = [b - a for a, b in zip(pings, pings[1:], strict=False)]
    assert all(interval / 4 < gap < interval for gap in gaps), gaps

    proc.send_signal(signal.SIGTERM)
    stopping = fake_systemd.wait_for("STOPPING", "1", time.monotonic() + EXIT_TIMEOUT_S)
    assert stopping.pid == proc.pid
    assert proc.wait(timeout=EXIT_TIMEOUT_S) == 0, fake_systemd.log()
    assert wait_gone([pid for pid, _ in session_members(proc.pid)], timeout=10) == []
