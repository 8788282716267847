"""Figure 11, storage: pod start-up with one CSI volume, and the API requests a claim costs.

pkletd joins the test API server (as in the cluster figure) with the test host-path CSI
driver (``tests.harness.csidriver``, staging) registered through ``plugins_registry``,
and a CSIDriver object with ``attachRequired: false`` (no VolumeAttachment to wait for).
Each of ``--csi-rounds`` (2) rounds runs, one after the other, on the same pkletd:

* **plain**: ``--csi-pods`` (10) pods like the cluster figure's (one busybox loop,
  hostNetwork, grace 1) created through the API at once;
* **volume**: as many pods of the same kind, each mounting its own claim at ``/data``: a
  PersistentVolumeClaim bound (by the bench, before the pod is created, as the PV
  controller would) to a PersistentVolume of the driver's with a fresh volume handle;
  pkletd reads the claim, the volume and the CSIDriver, stages the volume once and
  publishes it for the pod before it starts the container;
* **bare** (``csifloor``): the driver's own NodeStageVolume + NodePublishVolume, made
  through pkletd's CSI client on as many fresh volumes, all asked at once on as many
  threads as pkletd's pod-sync parallelism.

A pod's start-up is from its create request to the first list of the API that shows it
Running and ready (polled every ``POLL_S``). The baseline of a pod with a volume is a pod
without one plus the volume's bare stage and publish, so the ratio (p50 with a volume over
plain p50 + bare p50; the same for p99) and the difference show what pkletd adds for a
volume: API reads, a capability query, ``vol_data.json`` files, the bus. The driver's own
time for one volume, one at a time, is printed beside it, and where a volume pod's time
goes: from its creation to pkletd's ``volume published`` log line, then to Running.

API requests per pod: pkletd's (user ``system:node:<node>``) from the first create until
its requests stop for ``QUIET_S``, and from the first delete until the pods are gone
from the API and its requests stop again (a volume pod is gone once its volume is
unpublished and unstaged), divided by the pods; the node's periodic requests (lease,
node GET) left out. Volume pods against plain ones, by call.
"""

from __future__ import annotations

import collections
import re
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import kubernetes.client

from tests.bench.cluster import QUIET_S, bench_pod, ready
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
from tests.bench.csifloor import CsiFloor
from tests.harness.apiserver import ApiServer, ApiServerConfig
from tests.harness.apiserver.client import Kube
from tests.harness.apiserver.metrics import RequestRecord
from tests.harness.csidriver import CsiDriverProcess, DriverConfig
from tests.harness.node import wait_for

DRIVER = "hostpath.csi.pkletd.bench"
NAMESPACE = "default"
POLL_S = 0.05
PERIODIC = (("PUT", "leases"), ("GET", "leases"), ("GET", "nodes"))
PUBLISHED = re.compile(r"^(\S+ \S+) INFO .* volume published pod=\S+/(\S+) ")
KINDS = ("plain", "volume")


@dataclass
class Batch:
    """One batch of pods: each one's start-up (s), when it was created (time.time()), and
    pkletd's requests from the first create until the pods were gone and it went quiet."""

    latencies: dict[str, float]
    created: dict[str, float]
    requests: list[RequestRecord]


def section(ctx: Context) -> None:
    root = ctx.scratch / "storage"
    server = ApiServer(root / "apiserver", ApiServerConfig())
    server.start()
    agent = ctx.agent = BenchPkletd(ctx.daemon.address, ctx.args.parallelism)
    kube = Kube(server)
    driver: CsiDriverProcess | None = None
    try:
        agent.join_cluster(server).start()
        driver = _start_driver(agent, root)
        kube.storage.create_csi_driver(
            {"metadata": {"name": DRIVER}, "spec": {"attachRequired": False}}
        )
        floor = CsiFloor(driver.config.endpoint, DRIVER, root / "bare-root")
        try:
            _measure(ctx, kube, server, agent, floor, driver)
        finally:
            floor.close()
    finally:
        _unmount_under([agent.base, root])
        ctx.drop_agent()
        if driver is not None:
            driver.stop()
        kube.close()
        server.stop()


def _start_driver(agent: BenchPkletd, root: Path) -> CsiDriverProcess:
    config = DriverConfig.for_kubelet(
        agent.root_dir, DRIVER, agent.node, root / "data", root / "calls.jsonl"
    )
    driver = CsiDriverProcess(config)
    driver.start()

    def registered() -> bool:
        agent.alive()
        return DRIVER in [d["name"] for d in agent.status().get("csi_drivers", [])]

    wait_for("the bench driver registered", registered, timeout=30)
    return driver


def _measure(
    ctx: Context,
    kube: Kube,
    server: ApiServer,
    agent: BenchPkletd,
    floor: CsiFloor,
    driver: CsiDriverProcess,
) -> None:
    count, threads = ctx.args.csi_pods, min(ctx.args.parallelism, ctx.args.csi_pods)
    user = f"system:node:{agent.node}"
    progress("storage: one volume pod and one bare volume, unmeasured")
    _batch(kube, server, user, _volume_pods(kube, agent.node, "warm", 1))
    floor.batch(1, 1)
    batches: dict[str, list[Batch]] = {kind: [] for kind in KINDS}
    bare: list[float] = []
    meter = CpuMeter(ctx.daemon, {"pkletd": list(agent.process_tree()), "driver": [driver.pid]})
    for r in range(ctx.args.csi_rounds):
        progress(f"storage: round {r + 1} of {ctx.args.csi_rounds}, {count} pods each way")
        plain = [bench_pod(f"plain{r}-{i:02d}", agent.node) for i in range(count)]
        batches["plain"].append(_batch(kube, server, user, plain))
        pods = _volume_pods(kube, agent.node, f"vol{r}", count)
        batches["volume"].append(_batch(kube, server, user, pods))
        bare += floor.batch(count, threads)
    cpu = meter.read()
    single = floor.one_at_a_time(count)
    published = _published_at(agent.log())
    _report(ctx, batches, bare, single, published, cpu)


# --------------------------------------------------------------------------- the pods


def _volume_pods(kube: Kube, node: str, prefix: str, count: int) -> list[dict[str, Any]]:
    """``count`` pods, each with a claim of its own bound to a fresh volume of the driver."""
    pods = []
    for i in range(count):
        name = f"{prefix}-{i:02d}"
        _bound_claim(kube, name)
        pod = bench_pod(name, node)
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]
        pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        pods.append(pod)
    return pods


def _bound_claim(kube: Kube, name: str) -> None:
    csi = {"driver": DRIVER, "volumeHandle": f"handle-{name}", "fsType": "ext4"}
    volume = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "csi": csi,
    }
    kube.core.create_persistent_volume({"metadata": {"name": f"pv-{name}"}, "spec": volume})
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    kube.core.create_namespaced_persistent_volume_claim(
        NAMESPACE, {"metadata": {"name": name}, "spec": claim}
    )
    kube.bind(f"{NAMESPACE}/{name}", f"pv-{name}")


def _batch(kube: Kube, server: ApiServer, user: str, pods: list[dict[str, Any]]) -> Batch:
    """Create the pods at once, wait until each is Running, delete them, wait until gone."""
    began = time.time()
    created: dict[str, float] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        created[name] = time.time()
        kube.core.create_namespaced_pod(NAMESPACE, pod)
    running: dict[str, float] = {}

    def all_running() -> bool:
        now = time.time()
        for found in kube.core.list_namespaced_pod(NAMESPACE).items:
            name = found.metadata.name
            if name in created and name not in running and ready(found):
                running[name] = now
        return len(running) == len(created)

    wait_for("every pod of the batch Running", all_running, timeout=300, every=POLL_S)
    up = _quiet(server, user)
    deleted = time.time()
    body = kubernetes.client.V1DeleteOptions(grace_period_seconds=1)
    for name in created:
        kube.core.delete_namespaced_pod(name, NAMESPACE, body=body)
    wait_for("every pod of the batch gone", lambda: _gone(kube, created), timeout=300)
    down = _quiet(server, user)
    requests = [
        r
        for r in server.requests(user=user, since=began)
        if (began <= r.when <= up or deleted <= r.when <= down)
        and (r.verb, r.resource) not in PERIODIC
    ]
    latencies = {n: running[n] - created[n] for n in created}
    return Batch(latencies, created, requests)


def _gone(kube: Kube, names: dict[str, float]) -> bool:
    return not any(p.metadata.name in names for p in kube.core.list_namespaced_pod(NAMESPACE).items)


def _quiet(server: ApiServer, user: str) -> float:
    """Wait until pkletd has made no request but its periodic ones for ``QUIET_S``; then."""

    def quiet() -> bool:
        recent = server.requests(user=user, since=time.time() - QUIET_S)
        return all((r.verb, r.resource) in PERIODIC for r in recent)

    wait_for("the node's requests to stop", quiet, timeout=300, every=0.5)
    return time.time()


def _published_at(log: str) -> dict[str, float]:
    """Pod name -> when pkletd logged its volume published (time.time())."""
    found = {}
    for line in log.splitlines():
        match = PUBLISHED.match(line)
        if match:
            stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
            found[match.group(2)] = stamp.timestamp()
    return found


def _unmount_under(roots: list[Path]) -> None:
    """Lazily unmount whatever a failed run left mounted under ``roots`` (deepest first)."""
    prefixes = tuple(f"{root}/" for root in roots)
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    points = [line.split()[4] for line in lines if line.split()[4].startswith(prefixes)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


# --------------------------------------------------------------------------- the report


def _report(
    ctx: Context,
    batches: dict[str, list[Batch]],
    bare: list[float],
    single: list[float],
    published: dict[str, float],
    cpu: dict[str, float],
) -> None:
    count = ctx.args.csi_pods
    times = {k: [t for b in batches[k] for t in b.latencies.values()] for k in KINDS}
    q = {k: (percentile(v, 50), percentile(v, 99)) for k, v in times.items()}
    q["bare"] = (percentile(bare, 50), percentile(bare, 99))
    base = tuple(q["plain"][i] + q["bare"][i] for i in (0, 1))
    added = q["volume"][0] - base[0]
    print(
        f"pod start-up with one CSI volume ({count} pods at once, each its own claim, "
        f"x{ctx.args.csi_rounds}; created -> Running in the API): "
        f"p50 {ms(q['volume'][0])}, p99 {ms(q['volume'][1])} vs without a volume "
        f"{ms(q['plain'][0])} / {ms(q['plain'][1])} + bare NodeStage+NodePublish "
        f"{ms(q['bare'][0])} / {ms(q['bare'][1])} = {ratio(q['volume'][0], base[0]):.2f}x "
        f"p50, {ratio(q['volume'][1], base[1]):.2f}x p99; pkletd adds {ms(added)} p50 "
        f"{cpu_line(cpu)}"
    )
    split = _where(batches["volume"], published)
    print(
        f"  the driver alone, one volume at a time: p50 {ms(percentile(single, 50))}; "
        f"a volume pod's time, p50: created -> volume published "
        f"{ms(percentile(split[0], 50))}, then -> Running {ms(percentile(split[1], 50))}"
    )
    per_pod = {k: _per_pod(batches[k], count) for k in KINDS}
    totals = {k: sum(v.values()) for k, v in per_pod.items()}
    print(
        f"API requests per pod, created -> Running -> deleted: with a volume "
        f"{totals['volume']:.1f} vs without {totals['plain']:.1f} "
        f"(+{totals['volume'] - totals['plain']:.1f})"
    )
    for kind in KINDS:
        calls = sorted(per_pod[kind].items(), key=lambda kv: (-kv[1], kv[0]))
        print(f"  {kind}, by call: " + ", ".join(f"{c} {n:.2f}" for c, n in calls))
    ctx.figures.update(
        {
            "storage_volume_p50_s": q["volume"][0],
            "storage_volume_p99_s": q["volume"][1],
            "storage_plain_p50_s": q["plain"][0],
            "storage_plain_p99_s": q["plain"][1],
            "storage_bare_p50_s": q["bare"][0],
            "storage_bare_p99_s": q["bare"][1],
            "storage_bare_single_p50_s": percentile(single, 50),
            "storage_ratio_p50": ratio(q["volume"][0], base[0]),
            "storage_ratio_p99": ratio(q["volume"][1], base[1]),
            "storage_added_p50_s": added,
            "storage_requests_per_pod": totals,
            "storage_requests_by_call_per_pod": per_pod,
            **{f"storage_{k}": v for k, v in cpu.items()},
        }
    )


def _where(batches: list[Batch], published: dict[str, float]) -> tuple[list[float], list[float]]:
    """Each volume pod's time to its volume published, and from there to Running."""
    before, after = [], []
    for batch in batches:
        for name, created in batch.created.items():
            if name in published:
                before.append(published[name] - created)
                after.append(batch.latencies[name] - before[-1])
    return before, after


def _per_pod(batches: list[Batch], count: int) -> dict[str, float]:
    calls = collections.Counter(
        f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
        for b in batches
        for r in b.requests
    )
    return {k: v / (count * len(batches)) for k, v in calls.items()}
