"""Running a handler against a container: exec, httpGet, tcpSocket or grpc, as the kubelet does.

- exec: CRI ExecSync with the probe's timeout; exit code 0 is success.
- httpGet: GET with the probe's headers (``User-Agent: kube-probe/...`` unless
  set); 2xx and 3xx are success; redirects are followed (up to 10) while they stay
  on the same host, and a redirect elsewhere is a success with a warning, as the
  kubelet does; at most 10 KiB of the body is read for the output; HTTPS is not
  verified.
- tcpSocket: a connection that opens is success.
- grpc: ``grpc.health.v1.Health/Check`` for the probe's service; SERVING is success.
- sleep (lifecycle hooks): waits the given seconds.

Probe traffic goes only to the pod's IP, or to 127.0.0.1 for hostNetwork pods: a
probe whose ``host`` names another address fails without sending anything.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urljoin, urlsplit

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pkletd.ipc.apimodel.podspec import Container
from pkletd.ipc.apimodel.probespec import Probe
from pkletd.ipc.runtime.cri import CriError, ExecResult

USER_AGENT = "kube-probe/1.31"
MAX_BODY = 10 * 1024
MAX_REDIRECTS = 10
LOOPBACK = "127.0.0.1"


class Executor(Protocol):
    """What an exec handler needs of the runtime (the CRI's ExecSync)."""

    def exec_sync(
        self, container_id: str, command: tuple[str, ...], timeout_s: int
    ) -> ExecResult: ...


@dataclass(frozen=True, slots=True)
class Target:
    """Where a probe goes: the container and the pod's address."""

    container: Container
    container_id: str
    pod_ip: str


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    output: str


def run(probe: Probe, target: Target, runtime: Executor) -> Outcome:
    if probe.handler == "sleep":  # lifecycle hooks only
        time.sleep(probe.sleep_s)
        return Outcome(True, "")
    if probe.handler == "exec":
        return _exec(probe, target, runtime)
    host = probe.host or target.pod_ip
    if host not in (target.pod_ip, LOOPBACK):
        return Outcome(False, f"probe host {host} is not the pod's address; not probing it")
    port = target.container.port_number(probe.port)
    if port is None:
        return Outcome(False, f"no port named {probe.port!r} in container {target.container.name}")
    if probe.handler == "httpGet":
        return _http(probe, host, port)
    if probe.handler == "tcpSocket":
        return _tcp(probe, host, port)
    return _grpc(probe, host, port)


def _exec(probe: Probe, target: Target, runtime: Executor) -> Outcome:
    try:
        result = runtime.exec_sync(target.container_id, probe.command, probe.timeout_s)
    except CriError as exc:
        if exc.code == "DEADLINE_EXCEEDED":
            return Outcome(
                False, f"command {list(probe.command)} timed out after {probe.timeout_s}s"
            )
        return Outcome(False, f"exec failed: {exc.detail}")
    output = (result.stdout + result.stderr)[:MAX_BODY].decode(errors="replace")
    return Outcome(result.exit_code == 0, output)


def _http(probe: Probe, host: str, port: int) -> Outcome:
    scheme = probe.scheme.lower()
    url = f"{scheme}://{_hostport(host, port)}{probe.path}"
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*", **dict(probe.headers)}
    for _ in range(MAX_REDIRECTS + 1):
        parts = urlsplit(url)
        try:
            status, location, body = _get(
                parts.scheme, parts.netloc, parts.path or "/", parts.query, headers, probe.timeout_s
            )
        except (OSError, http.client.HTTPException) as exc:
            return Outcome(False, f'Get "{url}": {exc}')
        if not (300 <= status < 400 and location):
            if 200 <= status < 400:
                return Outcome(True, body)
            return Outcome(False, f"HTTP probe failed with statuscode: {status}")
        target = urljoin(url, location)
        if urlsplit(target).hostname != parts.hostname:
            return Outcome(True, f"Probe terminated redirects, Response body: {body}")
        url = target
    return Outcome(False, f"stopped after {MAX_REDIRECTS} redirects")


def _get(
    scheme: str, netloc: str, path: str, query: str, headers: dict[str, str], timeout: float
) -> tuple[int, str, str]:
    if scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            netloc, timeout=timeout, context=context
        )
    else:
        conn = http.client.HTTPConnection(netloc, timeout=timeout)
    try:
        conn.request("GET", f"{path}?{query}" if query else path, headers=headers)
        reply = conn.getresponse()
        body = reply.read(MAX_BODY).decode(errors="replace")
        return reply.status, reply.getheader("Location", ""), body
    finally:
        conn.close()


def _tcp(probe: Probe, host: str, port: int) -> Outcome:
    try:
        with socket.create_connection((host, port), timeout=probe.timeout_s):
            return Outcome(True, "")
    except OSError as exc:
        return Outcome(False, f"dial tcp {_hostport(host, port)}: {exc}")


def _grpc(probe: Probe, host: str, port: int) -> Outcome:
    address = _hostport(host, port)
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(
                health_pb2.HealthCheckRequest(service=probe.service), timeout=probe.timeout_s
            )
        except grpc.RpcError as exc:
            return Outcome(False, f"rpc error: code = {exc.code().name} desc = {exc.details()}")
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return Outcome(
        status == "SERVING",
        f"service unhealthy (responded with {status})" if status != "SERVING" else "",
    )


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
