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
  exec, the end of the stream). kubectl 1.32 asks for a WebSocket (``v5.channel.k8s.io``)
  first; the test API server relays it as it comes, containerd 1.6's streaming server
  refuses v5 (403) and kubectl retries over SPDY: two exec requests through pkletd;
* the same with ``KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false``: SPDY at once, one exec
  request, as pkletd sees kubectl behind a real 1.32 API server (which ends kubectl's
  WebSocket itself and speaks SPDY to the kubelet). The figure's ratio is this one's;
* pkletd's ``/exec`` alone: a WebSocket (``v4.channel.k8s.io``, which the runtime speaks)
  from the bench straight to the kubelet API with the API server's kubelet-client
  certificate, a new connection each time as kubectl makes, until the runtime's status
  (``Success``) and the close: pkletd and the runtime's streaming path, no kubectl and no
  API server;
* ``kubectl get pod <pod> -o name``: kubectl's own fixed cost (its start, its config,
  one request through the API server), to show how much of the round trip is kubectl's;
* the baseline: a bare CRI ``ExecSync`` of ``true`` in the same container, on one gRPC
  channel in the bench's process: the runtime's own cost of running the command.

Medians and p99; the exec requests each variant made (counted by the API server, in the
unmeasured round). The figure is skipped, and says so, while pkletd's kubelet API has no
``/exec``: a request to ``/exec/...`` then gets Go's mux's ``404 page not found``.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import statistics
import subprocess
from collections.abc import Callable

import aiohttp
import grpc
from cri_api.v1 import api_pb2

from tests.bench.cluster import bench_pod
from tests.bench.common import BenchPkletd, Context, ms, percentile, progress, ratio
from tests.bench.kubeletapi import KubeletClient, client_tls, timed_rounds
from tests.harness.apiserver import ApiServer, ApiServerConfig
from tests.harness.apiserver.client import Kube
from tests.harness.containerd import cri_channel, runtime_service

POD = "exec0"
CONTAINER = "c0"
NOT_ROUTED = (404, b"404 page not found\n")
KUBECTL_EXEC = "kubectl exec -- true"
KUBECTL_SPDY = "kubectl exec -- true, SPDY only"
SPDY_ONLY = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
KUBECTL_GET = "kubectl get pod"
EXEC_SYNC = "CRI ExecSync true"
DIRECT = "pkletd /exec, WebSocket"
EXEC_QUERY = "command=true&output=1&error=1"
WEBSOCKET = "v4.channel.k8s.io"
ERROR_CHANNEL = 3  # where the runtime writes the command's status


def has_exec(agent: BenchPkletd, server: ApiServer) -> bool:
    """Whether pkletd's kubelet API routes ``/exec`` (asked as the API server asks)."""
    client = KubeletClient(agent.port, server.pki.kubelet_client_cert)
    try:
        answer = client.request(f"/exec/default/{POD}/{CONTAINER}?{EXEC_QUERY}")
    finally:
        client.close()
    return answer != NOT_ROUTED


def kubectl(kube: Kube, *args: str, env: dict[str, str] | None = None) -> Callable[[], None]:
    """A run of kubectl with the admin's kubeconfig (and ``env``), failing if kubectl does."""
    command = kube.kubectl_command(*args)
    environment = {**os.environ, **(env or {})}

    def run() -> None:
        done = subprocess.run(command, capture_output=True, timeout=60, env=environment)
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


async def _websocket_exec(url: str, tls: ssl.SSLContext) -> None:
    status = b""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url, protocols=(WEBSOCKET,), ssl=tls) as ws:
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY and message.data[0] == ERROR_CHANNEL:
                    status += message.data[1:]
    if b'"Success"' not in status:
        raise AssertionError(f"/exec of true ended with status {status!r}")


def direct_exec(agent: BenchPkletd, server: ApiServer) -> Callable[[], None]:
    """An exec of ``true`` straight to pkletd's kubelet API over a WebSocket."""
    url = f"wss://127.0.0.1:{agent.port}/exec/default/{POD}/{CONTAINER}?{EXEC_QUERY}"
    tls = client_tls(server.pki.kubelet_client_cert)
    return lambda: asyncio.run(_websocket_exec(url, tls))


def exec_requests(server: ApiServer, run: Callable[[], None]) -> int:
    """How many exec requests the API server got during one ``run``."""
    before = server.request_count(subresource="exec")
    run()
    return server.request_count(subresource="exec") - before


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
                KUBECTL_SPDY: kubectl(kube, "exec", POD, "--", "true", env=SPDY_ONLY),
                DIRECT: direct_exec(agent, server),
                KUBECTL_GET: kubectl(kube, "get", "pod", POD, "-o", "name"),
                EXEC_SYNC: exec_sync(channel, container_id),
            }
            # unmeasured: kubectl's discovery cache, the pyc cache; and the requests made
            requests = {name: exec_requests(server, calls[name]) for name in calls}
            progress(f"kubectl exec: {ctx.args.exec_runs} rounds")
            report(ctx, timed_rounds(calls, ctx.args.exec_runs), requests)
    finally:
        ctx.drop_agent()
        kube.close()
        server.stop()


def report(ctx: Context, times: dict[str, list[float]], requests: dict[str, int]) -> None:
    med = {name: statistics.median(t) for name, t in times.items()}
    p99 = {name: percentile(t, 99) for name, t in times.items()}
    spdy, base = med[KUBECTL_SPDY], med[EXEC_SYNC]
    path_cost = spdy - med[KUBECTL_GET]
    print(
        f"kubectl exec round trip ({ctx.args.exec_runs} runs of `true` through the API "
        f"server, SPDY: one exec request): median {ms(spdy)}, p99 {ms(p99[KUBECTL_SPDY])} vs "
        f"a bare CRI ExecSync {ms(base)}, p99 {ms(p99[EXEC_SYNC])} = {ratio(spdy, base):.1f}x"
    )
    print(
        f"  of which kubectl's own start and one API request (kubectl get pod): "
        f"{ms(med[KUBECTL_GET])}; the rest, the exec path: {ms(path_cost)} = "
        f"{ratio(path_cost, base):.1f}x the bare ExecSync"
    )
    print(
        f"  pkletd's /exec alone (a WebSocket straight to 10250): median {ms(med[DIRECT])}, "
        f"p99 {ms(p99[DIRECT])} = {ratio(med[DIRECT], base):.1f}x the bare ExecSync"
    )
    print(
        f"  kubectl's default (a WebSocket request refused by the runtime, then SPDY; "
        f"{requests[KUBECTL_EXEC]} exec requests, against {requests[KUBECTL_SPDY]}): median "
        f"{ms(med[KUBECTL_EXEC])}, p99 {ms(p99[KUBECTL_EXEC])} = "
        f"{ratio(med[KUBECTL_EXEC], base):.1f}x"
    )
    ctx.figures.update(
        {
            "exec_kubectl_spdy_median_s": spdy,
            "exec_kubectl_spdy_p99_s": p99[KUBECTL_SPDY],
            "exec_kubectl_median_s": med[KUBECTL_EXEC],
            "exec_kubectl_p99_s": p99[KUBECTL_EXEC],
            "exec_kubectl_get_median_s": med[KUBECTL_GET],
            "exec_direct_websocket_median_s": med[DIRECT],
            "exec_direct_websocket_p99_s": p99[DIRECT],
            "exec_direct_ratio": ratio(med[DIRECT], base),
            "exec_cri_execsync_median_s": base,
            "exec_cri_execsync_p99_s": p99[EXEC_SYNC],
            "exec_ratio": ratio(spdy, base),
            "exec_path_ratio": ratio(path_cost, base),
            "exec_requests": requests,
        }
    )
