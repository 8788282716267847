"""Figure 8, the kubelet API on a full node: ``/pods``, ``/stats/summary`` and
``/metrics/cadvisor`` latency, and the http worker's memory.

``--api-pods`` (110: the default ``maxPods``, a full node) static pods like the start-up
figure's (one busybox sleep loop each, hostNetwork) run on a pkletd whose kubelet API
(HTTPS, its self-signed serving certificate) trusts a CA of the bench's
(``authentication.x509.clientCAFile``; token webhook and anonymous off,
``authorization.mode: AlwaysAllow``). The client is in the bench's process: one
keep-alive HTTPS connection (``http.client``) with a client certificate of that CA, as
Prometheus and metrics-server scrape 10250; the bench checks it was never reopened.

Latency: ``--api-requests`` (200) rounds, after one unmeasured round; each round makes,
one after the other in an order shuffled every round, one request to ``/healthz``,
``/pods``, ``/stats/summary`` and ``/metrics/cadvisor`` and one pass of each floor, so a
change in the machine's load falls on all of them alike and none always runs right after
the same one. p50 and p99 (linear interpolation) of each. Two baselines:

* ``/healthz`` of the same server over the same connection: what any request costs
  (TLS, aiohttp, authentication, the client's side). Each endpoint's p50 and p99 as a
  ratio to it, and its own cost: its p50 less healthz's.
* the floor of the endpoint's data, in the bench's process: for ``/pods``,
  ``json.dumps`` of the same PodList (as served before the rounds); for the two stats
  endpoints, their sources read raw and nothing made of them (``statsfloor``). The
  endpoint's own cost as a ratio to it.

CPU: the http worker's over the rounds, per request; and, since the worker gathers the
stats in housekeeping passes (every 10 s, whether asked or not), its CPU over an idle
window of ``IDLE_S`` before the rounds (no request: the housekeeping's own cost per
second), and the requests' own share: the rounds' CPU less that rate over their wall time.

Memory: PSS and RSS of the ``pkletd: http`` worker (its pid from ``pkletd status``), from
``/proc/<pid>/smaps_rollup``: with no pod, after a few requests to each endpoint, and with
the pods, after the rounds; against each other and against the supervisor's PSS then. The
kubelet serves these endpoints from its one process, whose published limits
(KUBELET_FACTS.md §2) are RSS 200 MiB with 10 pods (``resource_usage_test.go``) and 300
MiB with 100 (``kubelet_perf.go``); no latency of these endpoints is published.
"""

from __future__ import annotations

import http.client
import json
import random
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tests.bench.common import (
    BenchPkletd,
    Context,
    CpuMeter,
    cpu_line,
    ms,
    percentile,
    progress,
    ratio,
)
from tests.bench.memory import rollup_kb
from tests.bench.startup import pod_names, run_pkletd
from tests.bench.statsfloor import RawStats
from tests.harness.apiserver.certs import Pki

HEALTHZ = "/healthz"
ENDPOINTS = (HEALTHZ, "/pods", "/stats/summary", "/metrics/cadvisor")
FLOOR_OF = {
    "/pods": "json.dumps of the same PodList",
    "/stats/summary": "its sources read raw",
    "/metrics/cadvisor": "the sources of cAdvisor's metrics read raw",
}
WARM_ROUNDS = 3  # requests to each endpoint before the no-pod memory reading
IDLE_S = 30.0  # the http worker's idle window: three housekeeping passes
KUBELET_RSS_MB = {10: 200, 100: 300}  # the kubelet's published limits, pods -> MiB
Times = dict[str, list[float]]
Quantiles = dict[str, tuple[float, float]]  # name -> (p50, p99)


def client_tls(cert: tuple[Path, Path]) -> ssl.SSLContext:
    """TLS for a client of pkletd's kubelet API, with a client certificate and key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # pkletd's self-signed serving certificate
    context.load_cert_chain(*(str(p) for p in cert))
    return context


class KubeletClient:
    """One keep-alive HTTPS connection to a kubelet API, with a client certificate.
    ``connects`` counts the connections it opened: 1 while keep-alive holds."""

    def __init__(self, port: int, cert: tuple[Path, Path]) -> None:
        self._connection = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=60, context=client_tls(cert)
        )
        self._socket: object = None
        self.connects = 0

    def request(self, path: str) -> tuple[int, bytes]:
        self._connection.request("GET", path)
        if self._connection.sock is not self._socket:
            self._socket = self._connection.sock
            self.connects += 1
        response = self._connection.getresponse()
        return response.status, response.read()

    def get(self, path: str) -> bytes:
        status, body = self.request(path)
        if status != 200:
            raise AssertionError(f"GET {path}: {status} {body[:300]!r}")
        return body

    def close(self) -> None:
        self._connection.close()


def api_config(client_ca: Path) -> dict[str, Any]:
    """KubeletConfiguration fields: client certificates of ``client_ca``, allowed all."""
    return {
        "authentication": {
            "x509": {"clientCAFile": str(client_ca)},
            "webhook": {"enabled": False},
            "anonymous": {"enabled": False},
        },
        "authorization": {"mode": "AlwaysAllow"},
    }


@dataclass(frozen=True, slots=True)
class Memory:
    http_pss_mb: float
    http_rss_mb: float
    supervisor_pss_mb: float


def memory_now(agent: BenchPkletd) -> Memory:
    http_pid = int(agent.workers()["http"]["pid"])
    assert agent.proc is not None
    return Memory(
        rollup_kb(http_pid, "Pss") / 1024,
        rollup_kb(http_pid, "Rss") / 1024,
        rollup_kb(agent.proc.pid, "Pss") / 1024,
    )


def timed_rounds(calls: Mapping[str, Callable[[], object]], rounds: int) -> Times:
    """Each call once per round, in an order shuffled every round (none always follows
    the same one); the wall time of each."""
    times: Times = {name: [] for name in calls}
    order, shuffle = list(calls), random.Random(rounds).shuffle
    for _ in range(rounds):
        shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            calls[name]()
            times[name].append(time.perf_counter() - t0)
    return times


@dataclass(frozen=True, slots=True)
class Rounds:
    """What the measured rounds found."""

    times: Times  # by endpoint path or floor name
    cpu: dict[str, float]  # CpuMeter's figures over the rounds
    sizes: dict[str, int]  # bytes of each endpoint's body
    cri_seconds: list[float]  # the floors' CRI calls, each pass
    wall_s: float  # the rounds' wall time
    idle_cpu_per_s: float  # the http worker's CPU per second with no request


def measure(ctx: Context, agent: BenchPkletd, client: KubeletClient) -> Rounds:
    pod_list = json.loads(client.get("/pods"))
    if len(pod_list["items"]) != ctx.args.api_pods:
        raise AssertionError(f"/pods lists {len(pod_list['items'])} pods")
    floor = RawStats(ctx.daemon.address)
    calls: dict[str, Callable[[], object]] = {p: partial(client.get, p) for p in ENDPOINTS}
    calls[FLOOR_OF["/pods"]] = lambda: json.dumps(pod_list).encode()
    calls[FLOOR_OF["/stats/summary"]] = floor.read_summary
    calls[FLOOR_OF["/metrics/cadvisor"]] = floor.read_cadvisor
    try:
        timed_rounds(calls, 1)  # unmeasured: the first CPU samples, warm caches
        floor.cri_seconds.clear()
        assert agent.proc is not None
        named = {"http": [int(agent.workers()["http"]["pid"])], "supervisor": [agent.proc.pid]}
        progress(f"kubelet API: the http worker idle for {IDLE_S:.0f} s")
        idle = CpuMeter(ctx.daemon, named)
        time.sleep(IDLE_S)
        idle_rate = idle.read()["cpu_http_s"] / IDLE_S
        sizes = {p: len(client.get(p)) for p in ENDPOINTS}  # every pod in a pass by now
        meter = CpuMeter(ctx.daemon, named)
        progress(f"kubelet API: {ctx.args.api_requests} rounds of {len(calls)} calls")
        t0 = time.monotonic()
        times = timed_rounds(calls, ctx.args.api_requests)
        wall = time.monotonic() - t0
        return Rounds(times, meter.read(), sizes, floor.cri_seconds, wall, idle_rate)
    finally:
        floor.close()


def section(ctx: Context) -> None:
    pki = Pki(ctx.scratch / "kubeletapi-pki")
    agent = ctx.agent = BenchPkletd(ctx.daemon.address, ctx.args.parallelism)
    agent.write_config(**api_config(pki.ca_cert_path))
    agent.start()
    client = KubeletClient(agent.port, pki.client_cert("bench"))
    try:
        timed_rounds({p: partial(client.get, p) for p in ENDPOINTS}, WARM_ROUNDS)
        memory = {"no pod": memory_now(agent)}
        progress(f"kubelet API: starting {ctx.args.api_pods} pods")
        run_pkletd(agent, pod_names(ctx.args.api_pods, "k"), ctx.daemon, ctx.args.poll_ms / 1000)
        memory["pods, before the rounds"] = memory_now(agent)
        rounds = measure(ctx, agent, client)
        memory["pods, after the rounds"] = memory_now(agent)
        if client.connects != 1:
            raise AssertionError(f"the client connected {client.connects} times, not once")
        report(ctx, rounds)
        report_memory(ctx, memory)
    finally:
        client.close()
        ctx.drop_agent()


def endpoint_line(path: str, quantiles: Quantiles, size: int) -> dict[str, float]:
    """Print one endpoint's figures against both baselines; return them."""
    (p50, p99), (base50, base99) = quantiles[path], quantiles[HEALTHZ]
    floor_name = FLOOR_OF[path]
    floor50, own = quantiles[floor_name][0], p50 - base50
    print(
        f"  {path:<18} p50 {ms(p50)}, p99 {ms(p99)} = {ratio(p50, base50):.1f}x / "
        f"{ratio(p99, base99):.1f}x healthz, {size / 1024:.0f} KiB; own cost p50 "
        f"{ms(own)} vs {floor_name} {ms(floor50)} = {ratio(own, floor50):.2f}x"
    )
    name = f"kubeletapi_{path.strip('/').replace('/', '_')}"
    return {
        f"{name}_p50_s": p50,
        f"{name}_p99_s": p99,
        f"{name}_healthz_ratio_p50": ratio(p50, base50),
        f"{name}_healthz_ratio_p99": ratio(p99, base99),
        f"{name}_floor_p50_s": floor50,
        f"{name}_own_cost_floor_ratio": ratio(own, floor50),
        f"{name}_bytes": size,
    }


def report(ctx: Context, rounds: Rounds) -> None:
    quantiles = {n: (percentile(t, 50), percentile(t, 99)) for n, t in rounds.times.items()}
    base50, base99 = quantiles[HEALTHZ]
    print(
        f"kubelet API, {ctx.args.api_pods} pods, {ctx.args.api_requests} sequential rounds "
        "over one keep-alive HTTPS connection with a client certificate:"
    )
    print(
        f"  {HEALTHZ:<18} p50 {ms(base50)}, p99 {ms(base99)} "
        "(the baseline: the same server's trivial endpoint)"
    )
    figures = {"kubeletapi_healthz_p50_s": base50, "kubeletapi_healthz_p99_s": base99}
    for path in ENDPOINTS[1:]:
        figures.update(endpoint_line(path, quantiles, rounds.sizes[path]))
    cri50 = percentile(rounds.cri_seconds, 50)
    requests = ctx.args.api_requests * len(ENDPOINTS)
    http_cpu = rounds.cpu["cpu_http_s"] / requests
    own_cpu = max(rounds.cpu["cpu_http_s"] - rounds.idle_cpu_per_s * rounds.wall_s, 0.0)
    print(
        f"  of the stats floors, the CRI calls (ListContainerStats, ImageFsInfo): p50 "
        f"{ms(cri50)}; http worker CPU per request {ms(http_cpu)} {cpu_line(rounds.cpu)}"
    )
    print(
        f"  http worker CPU idle (housekeeping alone) {ms(rounds.idle_cpu_per_s)} per second; "
        f"the requests' own, less that over the rounds' {rounds.wall_s:.0f} s: "
        f"{ms(own_cpu / requests)} per request"
    )
    figures |= {
        "kubeletapi_floor_cri_p50_s": cri50,
        "kubeletapi_http_cpu_per_request_s": http_cpu,
        "kubeletapi_http_idle_cpu_per_s": rounds.idle_cpu_per_s,
        "kubeletapi_http_own_cpu_per_request_s": own_cpu / requests,
    }
    ctx.figures.update(figures | {f"kubeletapi_{k}": v for k, v in rounds.cpu.items()})


def report_memory(ctx: Context, memory: dict[str, Memory]) -> None:
    idle, full = memory["no pod"], memory["pods, after the rounds"]
    kubelet = ", ".join(f"{mb} MiB with {n} pods" for n, mb in KUBELET_RSS_MB.items())
    print(
        f"http worker PSS with {ctx.args.api_pods} pods, after the rounds: "
        f"{full.http_pss_mb:.1f} MB vs {idle.http_pss_mb:.1f} MB with no pod = "
        f"{ratio(full.http_pss_mb, idle.http_pss_mb):.2f}x; vs the supervisor's "
        f"{full.supervisor_pss_mb:.1f} MB = {ratio(full.http_pss_mb, full.supervisor_pss_mb):.2f}x"
    )
    print(
        "  PSS / RSS of the http worker and the supervisor's PSS, MB: "
        + "; ".join(
            f"{when} {m.http_pss_mb:.1f} / {m.http_rss_mb:.1f}, {m.supervisor_pss_mb:.1f}"
            for when, m in memory.items()
        )
    )
    print(f"  the kubelet's published limits for its whole process: RSS {kubelet}")
    ctx.figures["kubeletapi_memory_mb"] = {
        when: {
            "http_pss": m.http_pss_mb,
            "http_rss": m.http_rss_mb,
            "supervisor_pss": m.supervisor_pss_mb,
        }
        for when, m in memory.items()
    }
    ctx.figures["kubeletapi_http_pss_ratio"] = ratio(full.http_pss_mb, idle.http_pss_mb)
