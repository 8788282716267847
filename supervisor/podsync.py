"""Syncing one pod: read what the runtime has, decide, act, read again.

``inspect`` gathers a pod's sandboxes and containers (the kubelet's PodStatus);
``podactions.compute_actions`` decides what to kill and what to start;
``PodSyncer`` carries the actions out
through the CRI and returns the pod's runtime state as it is after its own calls,
so the parent's cache is fresh without waiting for a relist.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pkletd.ipc.cri import (
    ContainerID,
    ContainerState,
    CriError,
    CriRuntime,
    SandboxID,
    SandboxSpec,
    SandboxState,
)
from pkletd.ipc.podspec import Container, Pod
from pkletd.supervisor import backoff, runtimespec
from pkletd.supervisor.backoff import CrashBackoff
from pkletd.supervisor.podactions import Actions, PodRuntime, compute_actions

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Waiting:
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class SyncResult:
    uid: str
    runtime: PodRuntime
    waiting: Mapping[str, Waiting] = field(default_factory=dict)
    retry_in: float | None = None  # seconds until a backoff or a failed step may go again
    terminated: bool = False


def inspect(runtime: CriRuntime, uid: str) -> PodRuntime:
    sandboxes = sorted(runtime.list_sandboxes(uid), key=lambda s: s.created_at, reverse=True)
    if sandboxes and sandboxes[0].state is SandboxState.READY:
        sandboxes[0] = runtime.sandbox_status(sandboxes[0].id)
    listed = runtime.list_containers(uid)
    containers = []
    for c in listed:
        try:
            containers.append(runtime.container_status(c))
        except CriError as exc:
            if not exc.not_found:
                raise
    containers.sort(key=lambda c: (c.attempt, c.created_at), reverse=True)
    return PodRuntime(uid, tuple(sandboxes), tuple(containers))


class PodSyncer:
    """Carries out a pod's actions through the CRI. Called on pod-worker threads."""

    def __init__(self, runtime: CriRuntime, logs_root: Path, crash_backoff: CrashBackoff) -> None:
        self._runtime = runtime
        self._logs_root = logs_root
        self._backoff = crash_backoff
        self._kills: dict[str, dict[str, int]] = {}  # pod uid -> container id -> grace
        self._kills_lock = threading.Lock()

    def request_kill(self, uid: str, container_id: str, grace_s: int) -> None:
        """Have the pod's next sync kill this container (a failed liveness or startup probe)."""
        with self._kills_lock:
            self._kills.setdefault(uid, {})[container_id] = grace_s

    def _take_kills(self, uid: str) -> dict[str, int]:
        with self._kills_lock:
            return self._kills.pop(uid, {})

    def sync(self, pod: Pod) -> SyncResult:
        state = inspect(self._runtime, pod.uid)
        kills = self._take_kills(pod.uid)
        for running in state.running():
            if running.id in kills:
                log.info(
                    "killing container pod=%s container=%s reason=probe failed",
                    pod.full_name,
                    running.name,
                )
                self._ignore_missing(self._runtime.stop_container, running.id, kills[running.id])
        if kills:
            state = inspect(self._runtime, pod.uid)
        actions = compute_actions(pod, state)
        if actions.kill_pod:
            self._kill_all(state, pod.grace_period_s)
        for unwanted in actions.kill:
            log.info(
                "killing container pod=%s container=%s reason=spec changed",
                pod.full_name,
                unwanted.name,
            )
            self._runtime.stop_container(unwanted.id, pod.grace_period_s)
        waiting: dict[str, Waiting] = {}
        retry: list[float] = []
        if actions.start:
            sandbox_id, spec = self._sandbox_for(pod, state, actions)
            for container in actions.start:
                self._start(pod, container, state, sandbox_id, spec, waiting, retry)
        self._remove_dead(state)
        return SyncResult(
            pod.uid, inspect(self._runtime, pod.uid), waiting, min(retry, default=None)
        )

    def forget(self, uid: str) -> None:
        self._backoff.forget_pod(uid)
        self._take_kills(uid)

    def terminate(self, uid: str, name: str, grace_s: int | None) -> SyncResult:
        """Stop and remove everything the runtime has for this pod."""
        state = inspect(self._runtime, uid)
        grace = state.grace_period() if grace_s is None else grace_s
        self._kill_all(state, grace)
        for container in state.containers:
            self._ignore_missing(self._runtime.remove_container, container.id)
        for sandbox in state.sandboxes:
            self._ignore_missing(self._runtime.remove_sandbox, sandbox.id)
        log.info("pod terminated pod=%s uid=%s", name, uid)
        return SyncResult(uid, PodRuntime(uid), terminated=True)

    def _kill_all(self, state: PodRuntime, grace_s: int) -> None:
        for container in state.running():
            self._ignore_missing(self._runtime.stop_container, container.id, grace_s)
        for sandbox in state.sandboxes:
            if sandbox.state is SandboxState.READY:
                self._ignore_missing(self._runtime.stop_sandbox, sandbox.id)

    def _ignore_missing(self, call: object, *args: object) -> None:
        assert callable(call)
        try:
            call(*args)
        except CriError as exc:
            if not exc.not_found:
                raise

    def _sandbox_for(
        self, pod: Pod, state: PodRuntime, actions: Actions
    ) -> tuple[SandboxID, SandboxSpec]:
        spec = runtimespec.sandbox_spec(pod, actions.sandbox_attempt, self._logs_root)
        if not actions.create_sandbox:
            sandbox = state.sandbox()
            assert sandbox is not None
            return sandbox.id, runtimespec.sandbox_spec(pod, sandbox.attempt, self._logs_root)
        Path(spec.log_directory).mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        sandbox_id = self._runtime.run_sandbox(spec)
        log.info(
            "sandbox started pod=%s attempt=%d sandbox=%s ms=%.0f",
            pod.full_name,
            spec.attempt,
            sandbox_id[:13],
            (time.monotonic() - started) * 1000,
        )
        return sandbox_id, spec

    def _start(
        self,
        pod: Pod,
        container: Container,
        state: PodRuntime,
        sandbox_id: SandboxID,
        sandbox: SandboxSpec,
        waiting: dict[str, Waiting],
        retry: list[float],
    ) -> None:
        previous = state.latest(container.name)
        restart_count = previous.attempt + 1 if previous is not None else 0
        if previous is not None and previous.state is not ContainerState.RUNNING:
            key = backoff.key(pod.uid, container.name, container.hash)
            wait = self._backoff.remaining(key, previous.finished_at / 1e9)
            if wait > 0:
                message = (
                    f"back-off {self._backoff.current(key):.0f}s restarting failed "
                    f"container={container.name} pod={pod.name}_{pod.namespace}({pod.uid})"
                )
                waiting[container.name] = Waiting("CrashLoopBackOff", message)
                retry.append(wait)
                return
            self._backoff.restarted(key)
        failure = self._create_and_start(pod, container, restart_count, sandbox_id, sandbox)
        if failure is not None:
            waiting[container.name] = failure
            retry.append(10.0)

    def _create_and_start(
        self,
        pod: Pod,
        container: Container,
        restart_count: int,
        sandbox_id: SandboxID,
        sandbox: SandboxSpec,
    ) -> Waiting | None:
        try:
            self._ensure_image(container, sandbox)
        except CriError as exc:
            log.error(
                "image pull failed pod=%s container=%s error=%s", pod.full_name, container.name, exc
            )
            return Waiting("ErrImagePull", exc.detail)
        except LookupError as exc:
            return Waiting("ErrImageNeverPull", str(exc))
        spec = runtimespec.container_spec(pod, container, restart_count)
        try:
            container_id = self._runtime.create_container(sandbox_id, spec, sandbox)
        except CriError as exc:
            log.error(
                "create failed pod=%s container=%s error=%s", pod.full_name, container.name, exc
            )
            return Waiting("CreateContainerError", exc.detail)
        try:
            self._runtime.start_container(container_id)
        except CriError as exc:
            log.error(
                "start failed pod=%s container=%s error=%s", pod.full_name, container.name, exc
            )
            return Waiting("RunContainerError", exc.detail)
        log.info(
            "container started pod=%s container=%s restart=%d id=%s",
            pod.full_name,
            container.name,
            restart_count,
            container_id[:13],
        )
        return None

    def _ensure_image(self, container: Container, sandbox: SandboxSpec) -> None:
        if container.image_pull_policy != "Always" and self._runtime.image_ref(container.image):
            return
        if container.image_pull_policy == "Never":
            raise LookupError(
                f'Container image "{container.image}" is not present with pull policy of Never'
            )
        self._runtime.pull_image(container.image, sandbox)

    def _remove_dead(self, state: PodRuntime) -> None:
        """Keep the newest dead instance of each container (for lastState); drop older ones."""
        names = {c.name for c in state.containers}
        for name in names:
            for old in state.instances(name)[1:]:
                if old.state is not ContainerState.RUNNING:
                    self._ignore_missing(self._runtime.remove_container, ContainerID(old.id))
