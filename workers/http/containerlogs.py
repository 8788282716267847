"""``/containerLogs/{namespace}/{pod}/{container}``: a container's log, as the kubelet's
``getContainerLogs`` and ``GetKubeletContainerLogs`` serve it.

The query is a v1 ``PodLogOptions`` (``follow``, ``previous``, ``timestamps``,
``tailLines`` or its old alias ``tail`` (``all`` means no limit), ``limitBytes``,
``sinceSeconds``, ``sinceTime``), decoded and validated with the kubelet's answers: 400
``{"message": "Unable to decode query."}``, 422 ``{"message": "Invalid request."}``, 404
``pod "y" does not exist`` / ``container "x" not found in pod "y"``, and 400 with
``validateContainerLogStatus``'s words when there is no log to show (``container "x" in
pod "y" is waiting to start: ContainerCreating``, ``previous terminated container "x" in
pod "y" not found``...).

Which file: the container instance the kubelet would pick (the running one, else the one
that ended, or with ``previous`` the one before), under
``<podLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.http.crilog import LogOptions, LogReader, stamp_ns
from pkletd.workers.http.view import NodeView, Pod

log = logging.getLogger(__name__)

STALL_S = 300.0  # a client that takes nothing for this long loses its stream
TEXT = "text/plain; charset=utf-8"
FALSE_WORDS = ("0", "f", "false")


class BadQuery(Exception):
    """A query the kubelet answers 400 (undecodable) or 422 (invalid) to."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NoLogs(Exception):
    """Why a container has no log to show (400), in the kubelet's words."""


def _boolean(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name)
    return value is not None and value.lower() not in FALSE_WORDS


def _integer(query: Mapping[str, str], name: str) -> int | None:
    value = query.get(name)
    if value is None:
        return None
    try:
        return int(value, 10)
    except ValueError:
        raise BadQuery(400, '{"message": "Unable to decode query."}') from None


def _time(query: Mapping[str, str], name: str) -> int | None:
    value = query.get(name)
    if value in (None, "", "null"):
        return None
    nanos = stamp_ns(value.encode())
    if nanos is None:
        raise BadQuery(400, '{"message": "Unable to decode query."}')
    return nanos


def log_options(query: Mapping[str, str], now_ns: int) -> tuple[LogOptions, bool]:
    """The PodLogOptions of a query, and ``previous``; BadQuery as the kubelet answers."""
    values = dict(query)
    tail = values.pop("tail", "")
    if tail:
        values["tailLines"] = tail
        if tail == "all":
            del values["tailLines"]
    tail_lines = _integer(values, "tailLines")
    limit_bytes = _integer(values, "limitBytes")
    since_seconds = _integer(values, "sinceSeconds")
    since_time = _time(values, "sinceTime")
    invalid = (
        (tail_lines is not None and tail_lines < 0)
        or (limit_bytes is not None and limit_bytes < 1)
        or (since_seconds is not None and since_seconds < 1)
        or (since_seconds is not None and since_time is not None)
    )
    if invalid:
        raise BadQuery(422, '{"message": "Invalid request."}')
    since = since_time
    if since_seconds is not None:
        since = now_ns - since_seconds * 1_000_000_000
    options = LogOptions(
        follow=_boolean(values, "follow"),
        tail_lines=tail_lines,
        limit_bytes=limit_bytes,
        since_ns=since,
        timestamps=_boolean(values, "timestamps"),
    )
    return options, _boolean(values, "previous")


@dataclass(frozen=True, slots=True)
class LogFile:
    path: str
    container_id: str  # the instance, to know while following whether it still runs


def _container_names(pod: Pod) -> set[str]:
    spec = pod.get("spec") or {}
    kinds = ("containers", "initContainers", "ephemeralContainers")
    return {c.get("name", "") for kind in kinds for c in spec.get(kind) or []}


def _status_of(pod: Pod, container: str) -> dict[str, Any] | None:
    status = pod.get("status") or {}
    for kind in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for found in status.get(kind) or []:
            if found.get("name") == container:
                return dict(found)
    return None


def pick_instance(
    pod_name: str, container: str, status: dict[str, Any] | None, previous: bool
) -> tuple[int, str]:
    """(restart count, container ID) of the instance to read, by the kubelet's
    validateContainerLogStatus; NoLogs with its words when there is none."""
    if status is None:
        raise NoLogs(f'container "{container}" in pod "{pod_name}" is not available')
    state, last = status.get("state") or {}, (status.get("lastState") or {}).get("terminated")
    count = int(status.get("restartCount") or 0)
    last_id = (last or {}).get("containerID", "")
    # pkletd's status: a waiting container's lastState is its latest instance (restartCount);
    # a running or ended one's lastState is the instance before it.
    last_count = count if "waiting" in state else count - 1
    if previous:
        if not last_id:
            raise NoLogs(
                f'previous terminated container "{container}" in pod "{pod_name}" not found'
            )
        return last_count, last_id
    if "running" in state:
        return count, str(status.get("containerID", ""))
    if "terminated" in state:
        if state["terminated"].get("containerID"):
            return count, str(state["terminated"]["containerID"])
        if last_id:
            return last_count, last_id
        raise NoLogs(f'container "{container}" in pod "{pod_name}" is terminated')
    if last is not None:
        if not last_id:
            raise NoLogs(f'container "{container}" in pod "{pod_name}" is terminated')
        return last_count, last_id
    if "waiting" in state:
        reason = (state.get("waiting") or {}).get("reason", "")
        if reason == "ErrImagePull":
            reason = "image can't be pulled"
        elif reason == "ImagePullBackOff":
            reason = "trying and failing to pull image"
        raise NoLogs(f'container "{container}" in pod "{pod_name}" is waiting to start: {reason}')
    raise NoLogs(f'container "{container}" in pod "{pod_name}" is waiting to start - no logs yet')


def log_file(pods_dir: str, pod: Pod, container: str, previous: bool) -> LogFile:
    meta = pod["metadata"]
    count, container_id = pick_instance(
        meta["name"], container, _status_of(pod, container), previous
    )
    pod_dir = f"{meta.get('namespace', '')}_{meta['name']}_{meta.get('uid', '')}"
    return LogFile(os.path.join(pods_dir, pod_dir, container, f"{count}.log"), container_id)


class ContainerLogs:
    def __init__(self, view: NodeView, pods_dir: str, clock: Clock = SYSTEM_CLOCK):
        self._view = view
        self._pods_dir = pods_dir
        self._clock = clock

    async def handle(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        name, container = request.match_info["pod"], request.match_info["container"]
        try:
            options, previous = log_options(request.query, int(self._clock.time() * 1e9))
        except BadQuery as exc:
            return web.Response(status=exc.status, text=str(exc), content_type="text/plain")
        pod = self._view.find_pod(namespace, name)
        if pod is None:
            return _text(404, f'pod "{name}" does not exist')
        if container not in _container_names(pod):
            return _text(404, f'container "{container}" not found in pod "{name}"')
        try:
            target = log_file(self._pods_dir, pod, container, previous)
            reader = LogReader(target.path, options, self._follows(pod, target, request))
            f = reader.open()
        except NoLogs as exc:
            return _text(400, str(exc))
        except OSError as exc:
            return _text(400, f'failed to open log file "{target.path}": {exc.strerror}')
        return await self._stream(request, reader, f)

    def _follows(self, pod: Pod, target: LogFile, request: web.Request) -> Callable[[], bool]:
        uid = pod["metadata"].get("uid", "")

        def running() -> bool:
            gone = request.transport is None or request.transport.is_closing()
            return not gone and self._view.container_running(uid, target.container_id)

        return running

    async def _stream(self, request: web.Request, reader: LogReader, f: Any) -> web.StreamResponse:
        # No length: aiohttp chunks it for HTTP/1.1 and ends it by closing for HTTP/1.0.
        response = web.StreamResponse(headers={"Content-Type": TEXT})
        try:
            await response.prepare(request)
        except ConnectionError:
            f.close()
            return response

        async def write(data: bytes) -> None:
            await asyncio.wait_for(response.write(data), STALL_S)

        try:
            await reader.copy(f, write)
            await response.write_eof()
        except TimeoutError:
            log.info("log stream stalled path=%s peer=%s", request.path, request.remote)
            response.force_close()
        except ConnectionError:
            response.force_close()
        return response


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message, content_type="text/plain")
