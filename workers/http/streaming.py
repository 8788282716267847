"""``/exec``, ``/attach``, ``/portForward`` and ``/run``, as the kubelet's server serves
them: the session itself is the runtime's (CRI Exec/Attach/PortForward give a URL on its
streaming server), the kubelet API checks the request, finds the container and proxies
the client's upgraded connection there (``streamproxy``).

In the kubelet's order and words:

1. the options (``streamoptions``): 400;
2. the pod, by namespace and name in the node's view: 404 ``pod does not exist``
   (port-forward: a UID in the path that is not the pod's, 404 ``pod not found``);
3. the container, running now (its status's ``containerID``), and of the pod with the
   path's UID if one is given: 500 ``container not found ("c")`` (attach: ``container c
   not found in pod name_namespace``); port-forward wants a ready sandbox or a running
   container (500 ``pod not found ("name_namespace")``) and takes the newest sandbox;
4. not an upgrade: 500 ``Upgrade request required``;
5. the CRI call: NotFound 404, ResourceExhausted 429 (with its ``Retry-After``), any
   other failure 500, with the runtime's error.

attach's terminal is the container's own (its spec's ``tty``), whatever the request
says, as the kubelet decides. ``/run`` (POST) runs ``cmd`` split on spaces with ExecSync
and no time limit, and answers its stdout then stderr (``application/json``, as the
kubelet labels it), or 500 ``command '...' exited with N: <stderr>``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pkletd.ipc.runtime.cri import CriError, CriRuntime, SandboxInfo, SandboxState
from pkletd.workers.http.streamoptions import (
    BadStreamRequest,
    exec_command,
    forwarded_ports,
    is_upgrade_request,
    run_command,
    stream_flags,
)
from pkletd.workers.http.streamproxy import proxy_upgrade
from pkletd.workers.http.view import NodeView, Pod

STATUS_KINDS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
SPEC_KINDS = ("initContainers", "containers", "ephemeralContainers")
RETRY_AFTER = re.compile(r"\[Retry-After:([0-9]+)\]")
CRI_STATUS = {"NOT_FOUND": 404, "RESOURCE_EXHAUSTED": 429}


class Streaming:
    def __init__(self, view: NodeView, runtime: CriRuntime, idle_timeout: float) -> None:
        self._view = view
        self._runtime = runtime
        self._idle_timeout = idle_timeout

    async def exec(self, request: web.Request) -> web.StreamResponse:
        try:
            flags = stream_flags(request.query)
        except BadStreamRequest as exc:
            return _text(400, str(exc))
        found = self._container(request, _not_found)
        if isinstance(found, web.Response):
            return found
        container_id, command = found[1], exec_command(request.query)
        return await self._stream(
            request, lambda: self._runtime.exec_url(container_id, command, flags)
        )

    async def attach(self, request: web.Request) -> web.StreamResponse:
        try:
            flags = stream_flags(request.query)
        except BadStreamRequest as exc:
            return _text(400, str(exc))
        found = self._container(request, _not_in_pod)
        if isinstance(found, web.Response):
            return found
        pod, container_id = found
        tty = bool(container_spec(pod, request.match_info["container"]).get("tty"))
        flags = dataclasses.replace(flags, tty=tty)
        return await self._stream(request, lambda: self._runtime.attach_url(container_id, flags))

    async def port_forward(self, request: web.Request) -> web.StreamResponse:
        try:
            ports = forwarded_ports(request.query, request.headers)
        except BadStreamRequest as exc:
            return _text(400, str(exc))
        pod = self._pod(request)
        if pod is None:
            return _text(404, "pod does not exist")
        uid = pod["metadata"].get("uid", "")
        if request.match_info.get("uid", uid) != uid:
            return _text(404, "pod not found")
        try:
            sandboxes = await _off_loop(lambda: self._runtime.list_sandboxes(uid))
        except CriError as exc:
            reason = f"failed to find sandboxID for pod {pod_desc(pod)}: {exc.status_text}"
            return _text(500, reason)
        if not _alive(pod, sandboxes):
            return _text(500, f'pod not found ("{full_name(pod)}")')
        if not sandboxes:
            return _text(500, f"failed to find sandboxID for pod {pod_desc(pod)}")
        newest = max(sandboxes, key=lambda s: (s.created_at, s.id))
        return await self._stream(request, lambda: self._runtime.port_forward_url(newest.id, ports))

    async def run(self, request: web.Request) -> web.StreamResponse:
        found = self._container(request, _not_found)
        if isinstance(found, web.Response):
            return found
        container_id = found[1]
        command = run_command(request.query)
        try:
            result = await asyncio.wrap_future(
                self._runtime.run_in_container(container_id, command)
            )
        except CriError as exc:
            return _text(500, exc.status_text)
        if result.exit_code != 0:
            stderr = result.stderr.decode(errors="replace")
            return _text(
                500, f"command '{' '.join(command)}' exited with {result.exit_code}: {stderr}"
            )
        output = result.stdout + result.stderr
        if not output:
            return web.Response(status=200)
        return web.Response(body=output, content_type="application/json")

    def _pod(self, request: web.Request) -> Pod | None:
        return self._view.find_pod(request.match_info["namespace"], request.match_info["pod"])

    def _container(
        self, request: web.Request, missing: Callable[[str, Pod], str]
    ) -> tuple[Pod, str] | web.Response:
        """The path's pod and the runtime ID of its running container; else the answer."""
        pod = self._pod(request)
        if pod is None:
            return _text(404, "pod does not exist")
        name = request.match_info["container"]
        container_id = running_container(pod, name, request.match_info.get("uid", ""))
        if container_id is None:
            return _text(500, missing(name, pod))
        return pod, container_id

    async def _stream(self, request: web.Request, url_of: Callable[[], str]) -> web.StreamResponse:
        if not is_upgrade_request(request.headers):
            return _text(500, "Upgrade request required\n")
        try:
            url = await _off_loop(url_of)
        except CriError as exc:
            return _cri_failure(exc)
        return await proxy_upgrade(request, url, self._idle_timeout)


def running_container(pod: Pod, name: str, uid: str) -> str | None:
    """The runtime's ID of the container ``name`` if it runs now (and the pod has ``uid``,
    when one is given)."""
    if uid and uid != pod["metadata"].get("uid"):
        return None
    status = pod.get("status") or {}
    for kind in STATUS_KINDS:
        for found in status.get(kind) or []:
            if found.get("name") == name and "running" in (found.get("state") or {}):
                container_id = str(found.get("containerID", "")).split("://")[-1]
                return container_id or None
    return None


def container_spec(pod: Pod, name: str) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    found = [c for kind in SPEC_KINDS for c in spec.get(kind) or [] if c.get("name") == name]
    return dict(found[0]) if found else {}


def full_name(pod: Pod) -> str:
    """The kubelet's pod full name, ``name_namespace``."""
    return f"{pod['metadata']['name']}_{pod['metadata'].get('namespace', '')}"


def pod_desc(pod: Pod) -> str:
    """The kubelet's ``format.PodDesc``: ``name_namespace(uid)``."""
    return f"{full_name(pod)}({pod['metadata'].get('uid', '')})"


def _alive(pod: Pod, sandboxes: list[SandboxInfo]) -> bool:
    """What the kubelet's runtime pod list holds: a ready sandbox or a running container."""
    if any(s.state is SandboxState.READY for s in sandboxes):
        return True
    status = pod.get("status") or {}
    statuses = [s for kind in STATUS_KINDS for s in status.get(kind) or []]
    return any("running" in (s.get("state") or {}) for s in statuses)


def _not_found(name: str, pod: Pod) -> str:
    return f'container not found ("{name}")'


def _not_in_pod(name: str, pod: Pod) -> str:
    return f"container {name} not found in pod {full_name(pod)}"


def _cri_failure(exc: CriError) -> web.Response:
    """The kubelet's ``streaming.WriteError``."""
    response = _text(CRI_STATUS.get(exc.code, 500), exc.status_text)
    retry = RETRY_AFTER.search(exc.detail)
    if exc.code == "RESOURCE_EXHAUSTED" and retry:
        response.headers["Retry-After"] = retry.group(1)
    return response


async def _off_loop(call: Callable[[], Any]) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, call)


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message, content_type="text/plain")
