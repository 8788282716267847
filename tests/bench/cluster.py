"""Figure 7, pkletd as a node of a cluster: API requests per pod and per minute, and
pod start-up through the API.

The test API server (``tests.harness.apiserver``) runs in the bench's process and
records every request with its user. pkletd joins it with the node's credentials
(``system:node:<node>``); only that user's requests are counted (the bench's own
client is the admin).

* per pod: ``--pods`` (100) pods like the start-up figure's (one busybox loop
  container, hostNetwork, grace 1) created through the API, bound to the node; the
  bench waits until the API shows every one Running and ready and pkletd's pod
  requests (pods and events) have stopped for ``QUIET_S``, then deletes them all
  (grace 1) and waits until the API no longer has them and the requests stopped
  again. pkletd's pod requests in those two spans, divided by the pods (the node's
  own, lease and node status, are the per-minute figure's).
* per minute: with the pods running and the node quiet, all of pkletd's requests over
  a ``--steady-s`` (60 s) window.
* start-up: the pods created from ``CREATORS`` threads (as fast as the API server takes
  them, as the static pods' manifests are written at once; a ReplicaSet controller
  creates its pods in parallel batches too), the first create to the last pod Running
  in the API (seen by a watch started before the first create: ``RunningObserver``),
  against the
  static-pod start-up of the same pods (the start-up figure's total, same run; run
  alone, ``--only cluster`` first starts the same pods as static pods on a pkletd of
  its own, not joined, and removes them).

The kubelet's side is counted from its documented behaviour (KUBELET_FACTS.md §5,
``status_manager.go``, ``kubelet_node_status.go``): each status write is a GET of
the pod then a PATCH; a pod that starts sees two writes (ContainerCreating, Running),
one that is deleted two more (containers stopping, stopped) and the final DELETE; its
events are Pulled, Created, Started and Killing. At steady state: a lease renewal
every 10 s, a node GET every 10 s (nodeStatusUpdateFrequency), a node status PATCH
every 5 min, and its watches re-made every 5-10 min (pods, node, services: ~0.4/min).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import kubernetes.client
from kubernetes.client.rest import ApiException

from tests.bench import apitimeline
from tests.bench.common import (
    BenchPkletd,
    Context,
    CpuMeter,
    clean_runtime,
    percentile,
    progress,
    ratio,
    verdict,
)
from tests.bench.startup import log_breakdown, pod_names, run_pkletd
from tests.harness.apiserver import ApiServer, ApiServerConfig
from tests.harness.apiserver.client import Kube
from tests.harness.containerd import PrivateContainerd
from tests.harness.node import BUSYBOX, wait_for

KUBELET_PER_POD = 2 * 2 + 2 * 2 + 1 + 4  # (GET + PATCH) x 4 writes, DELETE, 4 events
KUBELET_PER_MINUTE = 6 + 6 + 0.2 + 0.4  # lease, node GET, node PATCH, watch re-lists
POLL_S = 0.2
CREATORS = 4  # threads creating the pods
QUIET_S = 5.0  # no pod or event request for this long: the node has said everything
POD_RESOURCES = ("pods", "events")
RUN = "trap 'exit 0' TERM; while true; do sleep 1; done"


def bench_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "hostNetwork": True,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c0", "image": BUSYBOX, "command": ["sh", "-c", RUN]}],
        },
    }


def ready(pod: Any) -> bool:
    statuses = pod.status.container_statuses or []
    return pod.status.phase == "Running" and bool(statuses) and all(s.ready for s in statuses)


def ready_json(pod: dict[str, Any]) -> bool:
    """``ready`` of a pod as the API serves it."""
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(statuses) and all(s["ready"] for s in statuses)


class RunningObserver:
    """When each of ``names`` is first seen Running and ready, by a watch of the namespace
    (time.time() of the event's arrival), as a controller's informer sees it: the static
    pods' observer polls pkletd's status every ``--poll-ms``, at a few ms of CPU each; a
    list of 100 pods through the client's models costs the bench about 75 ms of CPU, 5 times
    a second, on the cores pkletd starts the pods on."""

    def __init__(self, kube: Kube, names: set[str]) -> None:
        self.running: dict[str, float] = {}
        self._kube = kube
        self._names = names
        self._version = self._list()
        threading.Thread(target=self._run, name="observer", daemon=True).start()

    def done(self) -> bool:
        return self.running.keys() >= self._names

    def _saw(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if name in self._names and name not in self.running and ready_json(pod):
            self.running[name] = time.time()

    def _list(self) -> str:
        response = self._kube.core.list_namespaced_pod("default", _preload_content=False)
        body = json.loads(response.data)
        for pod in body["items"]:
            self._saw(pod)
        return str(body["metadata"]["resourceVersion"])

    def _run(self) -> None:
        while not self.done():
            response = self._kube.core.list_namespaced_pod(
                "default",
                watch=True,
                resource_version=self._version,
                timeout_seconds=600,
                _preload_content=False,
            )
            pending = b""
            for chunk in response.stream(decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in filter(None, lines):
                    event = json.loads(line)
                    self._saw(event["object"])
                    self._version = event["object"]["metadata"]["resourceVersion"]
                if self.done():
                    break
            response.close()
            if not self.done():
                self._version = self._list()  # the watch ended early: catch up, watch again


@dataclass
class ApiRun:
    """One start-up of the pods through the API."""

    started: float  # the first create (time.time())
    running: dict[str, float]  # pod -> created to seen Running, s
    last: float  # the last pod seen Running (time.time())
    timeline: dict[str, float]
    cpu: dict[str, float]

    @property
    def total(self) -> float:
        return self.last - self.started


def section(ctx: Context) -> None:
    """Alone (``--only cluster``): ``--rounds`` rounds of the static baseline and the API
    start-up in ABBA order (load drifts on a shared machine; the last run is an API one,
    which also counts the requests), best of each. After the start-up figure: one API run
    against its static total."""
    standalone = "startup_pkletd_total_s" not in ctx.figures
    rounds = ctx.args.rounds if standalone else 1
    statics: list[float] = []
    runs: list[ApiRun] = []
    for round_no in range(1, rounds + 1):
        order = ("static", "api") if (rounds - round_no) % 2 == 0 else ("api", "static")
        for kind in order if standalone else ("api",):
            if kind == "static":
                statics.append(_static_baseline(ctx))
            else:
                runs.append(_api_round(ctx, counted=round_no == rounds))
    if standalone:
        ctx.figures["startup_pkletd_total_s"] = min(statics)
        ctx.figures["cluster_static_totals_s"] = statics
    ctx.figures["cluster_api_totals_s"] = [r.total for r in runs]
    _report_startup(ctx, min(runs, key=lambda r: r.total))


def _api_round(ctx: Context, counted: bool) -> ApiRun:
    """The pods created through the API on a pkletd joined to a new API server; if
    ``counted``, then its requests at steady state and for their deletion, reported."""
    server = ApiServer(ctx.scratch / "apiserver", ApiServerConfig())
    server.start()
    agent = BenchPkletd(ctx.daemon.address, ctx.args.parallelism)
    kube = Kube(server)
    try:
        ctx.agent = agent  # stopped by drop_agent even if its start fails
        agent.join_cluster(server).start()
        node = f"system:node:{agent.node}"
        wait_for("the node registered", lambda: _registered(kube, agent.node), timeout=60)
        meter = _meter(ctx.daemon, agent)
        started, created_at, seen_at = _create(kube, agent.node, ctx.args.pods)
        cpu = meter.read()
        run = ApiRun(
            started,
            {n: seen_at[n] - created_at[n] for n in created_at},
            max(seen_at.values()),
            _timeline(agent.log(), server, node, created_at, seen_at),
            cpu,
        )
        print(f"API pods' start-up: {run.total:.2f} s; CPU s: {_cpu_line(cpu)}", flush=True)
        print(f"  {_describe(run)}", flush=True)
        if counted:
            _count_requests(ctx, server, kube, node, started)
        return run
    finally:
        ctx.drop_agent()
        kube.close()
        server.stop()
        if not counted:
            clean_runtime(ctx.daemon.address)


def _timeline(
    log_text: str,
    server: ApiServer,
    node: str,
    created_at: dict[str, float],
    seen_at: dict[str, float],
) -> dict[str, float]:
    started = min(created_at.values())
    timeline = log_breakdown(log_text, started)
    added, containers = apitimeline.from_log(log_text)
    patched = apitimeline.last_patches(server.requests(user=node, since=started), seen_at)
    clocks = {
        "created": created_at,
        "added": added,
        "started": containers,
        "patched": patched,
        "seen": seen_at,
    }
    timeline.update(apitimeline.breakdown(clocks))
    return timeline


def _count_requests(ctx: Context, server: ApiServer, kube: Kube, node: str, started: float) -> None:
    """Wait for the node to go quiet, count its requests at steady state, delete the pods."""
    created = (started, _quiet(server, node))
    steady = _steady(server, node, ctx.args.steady_s)
    began = _delete(kube, ctx.args.pods)
    deleted = (began, _quiet(server, node))
    pod_calls = [
        r
        for span in (created, deleted)
        for r in server.requests(user=node, since=span[0])
        if r.when <= span[1] and r.resource in POD_RESOURCES
    ]
    _report_requests(ctx, pod_calls, steady)


def _static_baseline(ctx: Context) -> float:
    """The same pods as static pods on an unjoined pkletd; its total."""
    names = pod_names(ctx.args.pods, "s")
    progress(f"cluster: the baseline, {len(names)} static pods")
    agent = ctx.agent = BenchPkletd(ctx.daemon.address, ctx.args.parallelism)
    agent.start()
    meter = _meter(ctx.daemon, agent)
    run = run_pkletd(agent, names, ctx.daemon, ctx.args.poll_ms / 1000)
    cpu = meter.read()
    ctx.figures.setdefault("cluster_static_cpu", []).append(cpu)
    print(f"static pods' start-up: {run.total:.2f} s; CPU s: {_cpu_line(cpu)}", flush=True)
    ctx.drop_agent()
    clean_runtime(ctx.daemon.address)
    return run.total


def _meter(daemon: PrivateContainerd, agent: BenchPkletd) -> CpuMeter:
    """CPU of each of the agent's processes, by title, the runtime, the bench, the rest."""
    tree = agent.process_tree()
    return CpuMeter(daemon, {title.removeprefix("pkletd: "): [pid] for pid, title in tree.items()})


def _cpu_line(cpu: dict[str, float]) -> str:
    spent = sorted(
        (
            (k.removeprefix("cpu_").removesuffix("_s"), v)
            for k, v in cpu.items()
            if k.startswith("cpu_")
        ),
        key=lambda kv: -kv[1],
    )
    return ", ".join(f"{k} {v:.2f}" for k, v in spent) + f"; machine busy {cpu['machine_busy']:.0%}"


def _registered(kube: Kube, node: str) -> bool:
    try:
        kube.core.read_node(node)
    except ApiException:
        return False
    return True


def _create(kube: Kube, node: str, count: int) -> tuple[float, dict[str, float], dict[str, float]]:
    """Create the pods; the first create, when each was created and first seen Running and
    ready (time.time())."""
    names = [f"api{i:03d}" for i in range(count)]
    observer = RunningObserver(kube, set(names))
    progress(f"cluster: creating {count} pods through the API")
    started = time.time()
    created: dict[str, float] = {}

    def create(name: str) -> None:
        kube.core.create_namespaced_pod("default", bench_pod(name, node))
        created[name] = time.time()

    with ThreadPoolExecutor(CREATORS) as pool:
        list(pool.map(create, names))
    progress(f"cluster: {count} creates took {time.time() - started:.2f} s")
    wait_for("every API pod Running", observer.done, timeout=300, every=POLL_S)
    return started, created, observer.running


def _quiet(server: ApiServer, user: str) -> float:
    """Wait until the node has made no pod or event request for ``QUIET_S``; then."""

    def quiet() -> bool:
        recent = server.requests(user=user, since=time.time() - QUIET_S)
        return not any(r.resource in POD_RESOURCES for r in recent)

    wait_for("the node's pod requests to stop", quiet, timeout=300, every=1.0)
    return time.time()


def _steady(server: ApiServer, user: str, seconds: float) -> int:
    progress(f"cluster: counting the node's requests at steady state for {seconds:.0f} s")
    since = time.time()
    time.sleep(seconds)  # a measuring window, not a synchronisation
    return len(server.requests(user=user, since=since))


def _delete(kube: Kube, count: int) -> float:
    progress(f"cluster: deleting the {count} pods")
    began = time.time()
    body = kubernetes.client.V1DeleteOptions(grace_period_seconds=1)
    for i in range(count):
        kube.core.delete_namespaced_pod(f"api{i:03d}", "default", body=body)

    def all_gone() -> bool:
        names = {p.metadata.name for p in kube.core.list_namespaced_pod("default").items}
        return not any(n.startswith("api") for n in names)

    wait_for("every API pod deleted", all_gone, timeout=300, every=POLL_S)
    return began


def _report_requests(ctx: Context, records: list[Any], steady: int) -> None:
    count = ctx.args.pods
    by_kind = collections.Counter(
        f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}" for r in records
    )
    per_pod = len(records) / count
    per_minute = steady * 60 / ctx.args.steady_s
    print(
        f"API requests per pod, created -> Running -> deleted ({count} pods): "
        f"pkletd {per_pod:.1f} vs the kubelet's {KUBELET_PER_POD} = "
        f"{ratio(per_pod, KUBELET_PER_POD):.2f}x [target <= 1x: "
        f"{verdict(per_pod <= KUBELET_PER_POD)}]"
    )
    print("  by call: " + ", ".join(f"{k} {v / count:.2f}" for k, v in by_kind.most_common()))
    print(
        f"API requests per minute at steady state ({count} pods): pkletd {per_minute:.1f} "
        f"vs the kubelet's {KUBELET_PER_MINUTE:.1f} = "
        f"{ratio(per_minute, KUBELET_PER_MINUTE):.2f}x [target <= 1x: "
        f"{verdict(per_minute <= KUBELET_PER_MINUTE)}]"
    )
    ctx.figures.update(
        {
            "cluster_requests_per_pod": per_pod,
            "cluster_requests_per_minute": per_minute,
            "cluster_requests_by_call_per_pod": {k: v / count for k, v in by_kind.items()},
        }
    )
    ctx.figures["targets_met"]["cluster_requests_per_pod"] = per_pod <= KUBELET_PER_POD
    ctx.figures["targets_met"]["cluster_requests_per_minute"] = per_minute <= KUBELET_PER_MINUTE


def _describe(run: ApiRun) -> str:
    timeline = run.timeline
    if "log_first_pod_added_s" not in timeline:
        return "no timeline in the supervisor log"
    return (
        "from the first create (supervisor log): pods added "
        f"{timeline['log_first_pod_added_s']:.2f}-{timeline['log_last_pod_added_s']:.2f} s, "
        f"first sandbox {timeline['log_first_sandbox_started_s']:.2f} s, last container "
        f"started {timeline['log_last_container_started_s']:.2f} s; per pod: "
        + apitimeline.describe(timeline)
    )


def _report_startup(ctx: Context, run: ApiRun) -> None:
    count = ctx.args.pods
    latencies = sorted(run.running.values())
    static_total = ctx.figures.get("startup_pkletd_total_s", float("nan"))
    print(
        f"pod start-up through the API ({count} pods, created -> Running in the API, best of "
        f"{len(ctx.figures['cluster_api_totals_s'])}): total {run.total:.2f} s vs static pods "
        f"{static_total:.2f} s = {ratio(run.total, static_total):.2f}x; per pod p50 "
        f"{percentile(latencies, 50):.2f} s, p99 {percentile(latencies, 99):.2f} s"
    )
    print(f"  {_describe(run)}")
    ctx.figures.update(
        {
            **{f"cluster_{k}": v for k, v in run.timeline.items()},
            "cluster_api_cpu": run.cpu,
            "cluster_startup_total_s": run.total,
            "cluster_startup_ratio": ratio(run.total, static_total),
            "cluster_startup_p50_s": percentile(latencies, 50),
            "cluster_startup_p99_s": percentile(latencies, 99),
        }
    )
