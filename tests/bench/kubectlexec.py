"""Figure 9, the ``kubectl exec`` round trip: ``kubectl exec <pod> -- true`` through the
test API server and pkletd's ``/exec``, against a bare CRI ``ExecSync`` of ``true``.

The test API server (``tests.harness.apiserver``, in the bench's process) and a pkletd
joined to it as the kubelet API's end-to-end tests join one: its kubelet API trusts the
cluster CA (so the API server's kubelet-client certificate gets in) and is found at
127.0.0.1. One pod like the cluster figure's (a busybox sleep loop, hostNetwork), created
through the API. ``--exec-runs`` (20) rounds after one unmeasured round; each round runs,
one after the other in a shuffled order:

* ``kubectl exec <pod> -- true``: the wall time of the process (kubectl's start, its GET
  of the pod, the upgraded exec request through the API server to pkletd, the runtime's
  exec, the end of the stream);
* ``kubectl get pod <pod> -o name``: kubectl's own fixed cost (its start, its config,
  one request through the API server), to show how much of the round trip is kubectl's;
* the baseline: a bare CRI ``ExecSync`` of ``true`` in the same container, on one gRPC
  channel in the bench's process: the runtime's own cost of running the command.

Medians and p99. The figure is skipped, and says so, while pkletd's kubelet API has no
``/exec``: a request to ``/exec/...`` then gets Go's mux's ``404 page not found``.
"""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Callable

import grpc
from cri_api.v1 import api_pb2

from tests.bench.cluster import bench_pod
from tests.bench.common import BenchPkletd, Context, ms, percentile, progress, ratio
from tests.bench.kubeletapi import KubeletClient, timed_rounds
from tests.harness.apiserver import ApiServer, ApiServerConfig
from tests.harness.apiserver.client import Kube
from tests.harness.containerd import cri_channel, runtime_service

POD = "exec0"
CONTAINER = "c0"
NOT_ROUTED = (404, b"404 page not found\n")
KUBECTL_EXEC = "kubectl exec -- true"
KUBECTL_GET = "kubectl get pod"
EXEC_SYNC = "CRI ExecSync true"


def has_exec(agent: BenchPkletd, server: ApiServer) -> bool:
    """Whether pkletd's kubelet API routes ``/exec`` (asked as the API server asks)."""
    client = KubeletClient(agent.port, server.pki.kubelet_client_cert)
    try:
        answer = client.request(f"/exec/default/{POD}/{CONTAINER}?command=true&output=1")
    finally:
        client.close()
    return answer != NOT_ROUTED


def kubectl(kube: Kube, *args: str) -> Callable[[], None]:
    """A run of kubectl with the admin's kubeconfig, failing if kubectl does."""
    command = kube.kubectl_command(*args)

    def run() -> None:
        done = subprocess.run(command, capture_output=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-2000:]}"
            )

    return run


def exec_sync(channel: grpc.Channel, container_id: str) -> Callable[[], None]:
    runtime = runtime_service(channel)
    request = api_pb2.ExecSyncRequest(container_id=container_id, cmd=["true"], timeout=10)

    def call() -> None:
        reply = runtime.ExecSync(request, timeout=30)
        if reply.exit_code != 0:
            raise AssertionError(f"ExecSync true exited {reply.exit_code}")

    return call


def section(ctx: Context) -> None:
    server = ApiServer(ctx.scratch / "exec-apiserver", ApiServerConfig())
    server.start()
    agent = ctx.agent = BenchPkletd(ctx.daemon.address, ctx.args.parallelism)
    agent.write_config(authentication={"x509": {"clientCAFile": str(server.ca_path)}})
    agent.extra_args += ["--node-ip", "127.0.0.1"]
    kube = Kube(server)
    try:
        agent.join_cluster(server)
        agent.start()
        kube.core.create_namespaced_pod("default", bench_pod(POD, agent.node))
        container_id = agent.wait_api_pod(POD, timeout=60)["containers"][0]["container_id"]
        if not has_exec(agent, server):
            print("kubectl exec round trip: skipped, pkletd's kubelet API has no /exec yet")
            ctx.figures["exec_skipped"] = "no /exec"
            return
        with cri_channel(ctx.daemon.address) as channel:
            calls = {
                KUBECTL_EXEC: kubectl(kube, "exec", POD, "--", "true"),
                KUBECTL_GET: kubectl(kube, "get", "pod", POD, "-o", "name"),
                EXEC_SYNC: exec_sync(channel, container_id),
            }
            timed_rounds(calls, 1)  # unmeasured: kubectl's discovery cache, the pyc cache
            progress(f"kubectl exec: {ctx.args.exec_runs} rounds")
            report(ctx, timed_rounds(calls, ctx.args.exec_runs))
    finally:
        ctx.drop_agent()
        kube.close()
        server.stop()


def report(ctx: Context, times: dict[str, list[float]]) -> None:
    med = {name: statistics.median(t) for name, t in times.items()}
    p99 = {name: percentile(t, 99) for name, t in times.items()}
    exec_med, base_med = med[KUBECTL_EXEC], med[EXEC_SYNC]
    path_cost = exec_med - med[KUBECTL_GET]
    print(
        f"kubectl exec round trip ({ctx.args.exec_runs} runs of `true`, through the API "
        f"server): median {ms(exec_med)}, p99 {ms(p99[KUBECTL_EXEC])} vs a bare CRI ExecSync "
        f"{ms(base_med)}, p99 {ms(p99[EXEC_SYNC])} = {ratio(exec_med, base_med):.1f}x"
    )
    print(
        f"  of which kubectl's own start and one API request (kubectl get pod): "
        f"{ms(med[KUBECTL_GET])}; the rest, the exec path: {ms(path_cost)} = "
        f"{ratio(path_cost, base_med):.1f}x the bare ExecSync"
    )
    ctx.figures.update(
        {
            "exec_kubectl_median_s": exec_med,
            "exec_kubectl_p99_s": p99[KUBECTL_EXEC],
            "exec_kubectl_get_median_s": med[KUBECTL_GET],
            "exec_cri_execsync_median_s": base_med,
            "exec_cri_execsync_p99_s": p99[EXEC_SYNC],
            "exec_ratio": ratio(exec_med, base_med),
            "exec_path_ratio": ratio(path_cost, base_med),
        }
    )
