"""Fuzzed HTTP to every port of the http worker: ``http_requests`` requests, spread over
the healthz port, the read-only port and the kubelet API (HTTPS), on ``THREADS``
threads, every connection to 127.0.0.1.

A request (``request``) starts from one of the kubelet's paths (``PATHS``, with a real
pod, a pod that does not exist or a random name) and is bent at random: the method, the
path (dot segments, escapes, NULs, very long), the query (bad numbers, ``follow``), the
version, the headers (bad or many ``Content-Length``, ``Transfer-Encoding: chunked``
with bad chunks, upgrades, huge or malformed lines, credentials) and the body; or it is
not HTTP at all, or is cut short. On the kubelet port most requests go over TLS, with a
client certificate of the cluster's CA, a valid or a random bearer token, or nothing.
Each waits ``REPLY_S`` at most for its answer. Commands that reach a container (``exec``,
``run``) are only ever ``COMMANDS``.

Must hold: the http worker never dies (same pid, no restart), no other worker restarts,
no handler fails (``handler failed``, aiohttp's ``Error handling request``), no ``/logs/``
answer shows a file outside ``/var/log`` (``/etc/passwd``), within ``KEPT_S`` it holds no
connection to its ports and no container log file (no follow stream kept), and its memory
is bounded. For memory, the last quarter of the requests is sent again once all
were: the same requests need the same memory again, so the RSS
(``/proc/<pid>/smaps_rollup``) the replay adds must stay under ``REPLAY_MB``; a leak would
grow again with every request. The run's own growth is
shown, not judged: the allocator keeps the high-water mark of what concurrent requests
built (a ``/stats/summary`` or ``/metrics/cadvisor`` answer with 90 pods is megabytes),
and the review caches fill up to their bound (4096 answers each). PSS is shown too: it
jumps once the worker's first full garbage collection writes to the objects it shares
with the fork server, whatever the requests. The first few 5xx answers are shown with
their request line (the kubelet's own 500s: ``Upgrade request required``...).
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from random import Random
from urllib.parse import quote

from tests.bench.memory import rollup_kb
from tests.soak.context import Soak, within
from tests.soak.report import Row

THREADS = 8
REPLY_S = 3.0
CHUNK = 500
REPLAY_PART = 4  # the last quarter is sent again
REPLAY_MB = 6.0
KEPT_S = 15.0
TCP_LISTEN = "0A"
SAMPLES = 3
TOKEN = "soak-fuzz-token"
USER = "soak-ops"
COMMANDS = ("true", "echo", "date", "no-such-command")
PATHS = (
    "/", "/healthz", "/healthz/ping", "/healthz/syncloop", "/healthz/nope", "/pods", "/pods/",
    "/runningpods/", "/stats/summary", "/stats/summary?only_cpu_and_memory=true", "/metrics",
    "/metrics/cadvisor", "/metrics/resource", "/metrics/probes", "/metrics/slis", "/spec/",
    "/configz", "/logs/", "/logs/{junk}", "/containerLogs/{ns}/{pod}/c0",
    "/containerLogs/{ns}/{pod}/c0?follow=true", "/containerLogs/{ns}/{pod}/c0?tailLines={num}",
    "/containerLogs/{ns}/{pod}/c0?sinceSeconds={num}&limitBytes={num}&timestamps=true",
    "/containerLogs/{ns}/{pod}/c0?previous=true", "/exec/{ns}/{pod}/c0?command={cmd}&output=1",
    "/exec/{ns}/{pod}/{uid}/c0?command={cmd}&input=1&tty=1", "/attach/{ns}/{pod}/c0?output=1",
    "/portForward/{ns}/{pod}?port={num}", "/run/{ns}/{pod}/c0?cmd={cmd}",
    "/checkpoint/{ns}/{pod}/c0", "/debug/pprof/", "/debug/flags/v",
)  # fmt: skip
METHODS = (
    "GET",
    "GET",
    "GET",
    "POST",
    "PUT",
    "DELETE",
    "PATCH",
    "HEAD",
    "OPTIONS",
    "CONNECT",
    "TRACE",
    "BREW",
    "G\x00T",
    "",
    "get",
    "X" * 300,
)
NUMBERS = ("0", "-1", "1", "10", "99999999999999999999", "1e3", "abc", "", "0x10", "%00")
VERSIONS = ("HTTP/1.1",) * 6 + ("HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTP/1.1x", "", "FOO/1")


@dataclass(frozen=True)
class Target:
    name: str
    port: int
    tls: bool


@dataclass(frozen=True)
class Credentials:
    plain: ssl.SSLContext  # no client certificate
    cert: ssl.SSLContext  # a client certificate of the cluster CA


def _context(cert: tuple[Path, Path] | None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(*(str(p) for p in cert))
    return context


def _junk(rng: Random) -> str:
    return rng.choice(
        [
            "..",
            "%2e%2e",
            "a/../../etc/passwd",
            "../../../../etc/passwd",
            "x" * 5000,
            "%00",
            "\u00e9",
            "//",
            ";",
            "?",
            "#",
            "..%2f..%2fetc%2fpasswd",
        ]
    )


def path(rng: Random, pods: list[tuple[str, str]]) -> str:
    ns, pod = rng.choice([*pods, ("default", "no-such-pod"), (_junk(rng), _junk(rng))])
    text = rng.choice(PATHS).format(
        ns=ns,
        pod=pod,
        uid=rng.choice(["", "0000", _junk(rng)]),
        junk=_junk(rng),
        num=rng.choice(NUMBERS),
        cmd=quote(rng.choice(COMMANDS)),
    )
    bend = rng.randrange(8)
    if bend == 0:
        text += "/" + _junk(rng)
    elif bend == 1:
        text = text.replace("/", rng.choice(["//", "/./", "/%2F"]), rng.randint(1, 3))
    elif bend == 2:
        text += ("&" if "?" in text else "?") + f"{_junk(rng)}={_junk(rng)}"
    return text


def _headers(rng: Random, body: bytes) -> list[str]:
    headers = ["Host: 127.0.0.1"]
    if rng.random() < 0.7:
        headers.append("Connection: close")
    extra = rng.randrange(10)
    if extra == 0:
        headers.append(
            f"Content-Length: {rng.choice(['-1', '99999999999', 'abc', str(len(body) + 5)])}"
        )
    elif extra == 1:
        headers += ["Transfer-Encoding: chunked", f"Content-Length: {len(body)}"]
    elif extra == 2:
        headers += [
            "Connection: Upgrade",
            f"Upgrade: {rng.choice(['SPDY/3.1', 'websocket', 'h2c'])}",
            "X-Stream-Protocol-Version: v4.channel.k8s.io",
            "Sec-WebSocket-Version: 13",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        ]
    elif extra == 3:
        headers.append("X-Big: " + "a" * rng.choice([100, 9000, 70000]))
    elif extra == 4:
        headers += [f"X-H{i}: {i}" for i in range(rng.choice([50, 200]))]
    elif extra == 5:
        headers.append(rng.choice(["no colon here", ": empty name", "Bad Name: x", "X:\x00\x01"]))
    elif extra == 6:
        headers.append(f"Authorization: Bearer {rng.choice([TOKEN, rng.randbytes(12).hex(), ''])}")
    elif extra == 7:
        headers.append(f"Range: bytes={rng.choice(['0-10', '-5', '99999999-', 'x-y', '5-1'])}")
    return headers


def request(rng: Random, pods: list[tuple[str, str]]) -> bytes:
    shape = rng.randrange(20)
    if shape == 0:
        return rng.randbytes(rng.randint(1, 4096))
    body = rng.randbytes(rng.choice([0, 0, 0, 10, 2000])) if rng.random() < 0.5 else b""
    if shape == 1:
        body = b"5\r\nhello\r\nZZ\r\nbad\r\n"
    lines = [
        f"{rng.choice(METHODS)} {path(rng, pods)} {rng.choice(VERSIONS)}",
        *_headers(rng, body),
    ]
    if body and shape != 1:
        lines.append(f"Content-Length: {len(body)}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode(errors="surrogateescape") + body
    if shape == 2:  # cut short
        raw = raw[: rng.randint(1, len(raw))]
    return raw


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    lowered = head.lower()
    if b"transfer-encoding: chunked" in lowered:
        return body.endswith(b"0\r\n\r\n")
    for line in lowered.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            try:
                return len(body) >= int(line.split(b":", 1)[1])
            except ValueError:
                return True
    return head.startswith(b"HTTP/1.1 101")


def _exchange(conn: socket.socket, payload: bytes) -> bytes:
    deadline = time.monotonic() + REPLY_S
    conn.settimeout(REPLY_S)
    conn.sendall(payload)
    data = b""
    while time.monotonic() < deadline and len(data) < 1 << 20 and not _complete(data):
        conn.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def send(target: Target, payload: bytes, context: ssl.SSLContext | None) -> tuple[str, bytes]:
    """One request; its outcome (``2xx``... ``closed``, ``timeout``) and what came back."""
    try:
        with socket.create_connection(("127.0.0.1", target.port), timeout=REPLY_S) as raw:
            if context is None:
                data = _exchange(raw, payload)
            else:
                with context.wrap_socket(raw) as conn:
                    data = _exchange(conn, payload)
    except TimeoutError:
        return "timeout", b""
    except (OSError, ssl.SSLError):
        return "closed", b""
    if data.startswith(b"HTTP/") and data[9:10].isdigit():
        return f"{data[9:10].decode()}xx", data
    return "closed" if not data else "not HTTP", data


class Fuzzer:
    def __init__(self, soak: Soak) -> None:
        node = soak.node
        self.targets = [
            Target("healthz", node.healthz_port, False),
            Target("read-only", node.read_only_port, False),
            Target("kubelet", node.port, True),
        ]
        soak.server.add_token(TOKEN, USER)
        self.credentials = Credentials(
            _context(None), _context(soak.server.client_cert(USER, ["ops"]))
        )
        self.pods = [(p["namespace"], p["name"]) for p in node.pods().values()]
        self.outcomes: Counter[str] = Counter()
        self.leaks = 0
        self.server_errors: list[str] = []  # request line -> status line, the first few

    def one(self, seed: int) -> None:
        rng = Random(seed)
        target = rng.choice(self.targets)
        context = None
        if target.tls and rng.random() < 0.85:
            context = self.credentials.cert if rng.random() < 0.6 else self.credentials.plain
        payload = request(rng, self.pods)
        outcome, data = send(target, payload, context)
        self.outcomes[f"{target.name} {outcome}"] += 1
        if b"root:x:0:0:" in data:
            self.leaks += 1
        if outcome == "5xx" and len(self.server_errors) < SAMPLES:
            asked, answered = payload.split(b"\r\n", 1)[0][:120], data.split(b"\r\n", 1)[0]
            self.server_errors.append(f"{asked!r} -> {answered.decode(errors='replace')}")


def _memory_mb(pid: int) -> tuple[float, float]:
    """RSS and PSS."""
    return rollup_kb(pid, "Rss") / 1024, rollup_kb(pid, "Pss") / 1024


def _kept(pid: int, ports: set[int], logs: Path) -> list[str]:
    """What the worker holds for clients: connections to its ports, container log files
    (its own connections, to the API server's reviews, are a pool: not counted)."""
    targets = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            targets[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
    inodes = {t[8:-1] for t in targets.values() if t.startswith("socket:[")}
    held = [t for t in targets.values() if t.startswith(str(logs))]
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        port, state, inode = int(fields[1].split(":")[1], 16), fields[3], fields[9]
        if inode in inodes and port in ports and state != TCP_LISTEN:
            held.append(f"a connection to port {port}")
    return held


def _http_log_errors(soak: Soak) -> int:
    """Handler failures: pkletd's own 500 (``handler failed``) and aiohttp's."""
    text = soak.node.log("http")
    return text.count("handler failed") + text.count("Error handling request")


def _send_all(soak: Soak, fuzzer: Fuzzer, seeds: list[int]) -> int:
    """The requests of ``seeds``, ``THREADS`` at a time, in chunks while time is left."""
    done = 0
    with ThreadPoolExecutor(THREADS) as pool:
        for at in range(0, len(seeds), CHUNK):
            if soak.out_of_time():
                break
            chunk = seeds[at : at + CHUNK]
            list(pool.map(fuzzer.one, chunk))
            done += len(chunk)
    return done


def _memory(row: Row, marks: list[tuple[float, float]]) -> None:
    """Before, after, after the replay: the replay's growth is what a leak would show."""
    (rss0, pss0), (rss1, pss1), (rss2, pss2) = marks
    row.check(f"memory bounded (the replay adds < {REPLAY_MB:g} MB RSS)", rss2 - rss1 < REPLAY_MB)
    row.note(
        f"http worker RSS {rss0:.1f} -> {rss1:.1f} -> {rss2:.1f} MB after the replay, "
        f"PSS {pss0:.1f} -> {pss1:.1f} -> {pss2:.1f} MB"
    )


def _released(row: Row, pid: int, ports: set[int], logs: Path) -> None:
    kept: list[str] = []

    def none_kept() -> bool:
        kept[:] = _kept(pid, ports, logs)
        return not kept

    if not row.check("no connection or log file kept", within(none_kept, KEPT_S)):
        row.note(f"kept: {', '.join(sorted(set(kept)))[:300]}")


def _restarts(soak: Soak) -> dict[str, int]:
    return {n: w["restarts"] for n, w in soak.workers().items()}


def run(soak: Soak) -> Row:
    wanted = soak.counts.http_requests
    row = Row("fuzzed HTTP requests to every port")
    fuzzer = Fuzzer(soak)
    pid, restarts, errors = soak.workers()["http"]["pid"], _restarts(soak), _http_log_errors(soak)
    seeds = [soak.rng.getrandbits(64) for _ in range(wanted)]
    marks = [_memory_mb(pid)]
    started = time.monotonic()
    done = _send_all(soak, fuzzer, seeds)
    took = time.monotonic() - started
    marks.append(_memory_mb(pid))
    _send_all(soak, fuzzer, seeds[-wanted // REPLAY_PART :])
    marks.append(_memory_mb(pid))
    row.count = f"{done} of {wanted} in {took:.0f} s, the last 1/{REPLAY_PART} again"
    row.check(f"{wanted} sent", done == wanted)
    row.check("0 crashes of the http worker", soak.workers()["http"]["pid"] == pid)
    row.check("no worker restarted", _restarts(soak) == restarts)
    row.check("0 handler failures", _http_log_errors(soak) == errors)
    row.check("no file outside /var/log served", fuzzer.leaks == 0)
    _released(row, pid, {t.port for t in fuzzer.targets}, soak.node.pod_logs)
    _memory(row, marks)
    if fuzzer.server_errors:
        row.note("5xx: " + "; ".join(fuzzer.server_errors))
    row.note("answers: " + ", ".join(f"{k} {v}" for k, v in sorted(fuzzer.outcomes.items())))
    return row
