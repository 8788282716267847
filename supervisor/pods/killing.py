"""Stopping containers as the kubelet does: preStop, then SIGTERM, and SIGKILL at the deadline.

A container's preStop hook runs before the CRI StopContainer call and uses up
part of the grace period; what is left is passed to the runtime, but never less
than 2 s (the kubelet's minimumGracePeriodInSeconds). A whole pod stops in the
kubelet's order: regular containers together, then sidecars one by one in
reverse order, each with what is left of the pod's grace period, then the
sandbox.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.runtime import handlers
from pkletd.ipc.runtime.cri import ContainerInfo, SandboxState, unless_gone
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason
from pkletd.supervisor.pods.runtime import Runtime
from pkletd.supervisor.pods.types import PodRuntime

log = logging.getLogger(__name__)

MINIMUM_GRACE_S = 2


def pod_address(pod: Pod, sandbox_ip: str) -> str:
    """Where hooks go: the pod's IP, or loopback for a hostNetwork pod."""
    return "127.0.0.1" if pod.host_network else sandbox_ip


class Killer:
    def __init__(self, runtime: Runtime, events: EventRecorder) -> None:
        self._runtime = runtime
        self._events = events

    def kill_pod(self, pod: Pod | None, state: PodRuntime, grace_s: int) -> None:
        """Stop every running container (in the kubelet's order) and the sandboxes."""
        deadline = time.monotonic() + grace_s
        sidecars = [c.name for c in pod.sidecars] if pod is not None else []
        running = state.running()
        regular = [c for c in running if c.name not in sidecars]
        self.kill_together(pod, state, regular, grace_s)
        for name in reversed(sidecars):
            for info in (c for c in running if c.name == name):
                left = max(MINIMUM_GRACE_S, int(deadline - time.monotonic()))
                self.kill(pod, state, info, left)
        for sandbox in state.sandboxes:
            if sandbox.state is SandboxState.READY:
                unless_gone(self._runtime.stop_sandbox, sandbox.id)

    def kill_together(
        self, pod: Pod | None, state: PodRuntime, infos: list[ContainerInfo], grace_s: int
    ) -> None:
        if len(infos) <= 1:
            for info in infos:
                self.kill(pod, state, info, grace_s)
            return
        with ThreadPoolExecutor(len(infos), thread_name_prefix="kill") as pool:
            for future in [pool.submit(self.kill, pod, state, i, grace_s) for i in infos]:
                future.result()

    def kill(
        self, pod: Pod | None, state: PodRuntime, info: ContainerInfo, grace_s: int, why: str = ""
    ) -> None:
        """Stop one container; ``why`` is the ``Killing`` event's message (the kubelet's)."""
        spec = _spec(pod, info.name)
        if pod is not None and spec is not None and spec.pre_stop is not None:
            grace_s = self._pre_stop(pod, state, spec, info, grace_s)
        if pod is not None:
            message = why or f"Stopping container {info.name}"
            self._events.normal(ObjectRef.of(pod, info.name), Reason.KILLING, message)
        unless_gone(self._runtime.stop_container, info.id, grace_s)

    def _pre_stop(
        self, pod: Pod, state: PodRuntime, spec: Container, info: ContainerInfo, grace_s: int
    ) -> int:
        assert spec.pre_stop is not None
        hook = dataclasses.replace(spec.pre_stop, timeout_s=max(1, grace_s))
        started = time.monotonic()
        sandbox = state.sandbox()
        target = handlers.Target(spec, info.id, pod_address(pod, sandbox.ip if sandbox else ""))
        outcome = handlers.run(hook, target, self._runtime)
        if not outcome.ok:
            message = f"PreStopHook failed: {outcome.output}"
            self._events.warning(ObjectRef.of(pod, spec.name), Reason.FAILED_PRE_STOP_HOOK, message)
        return max(MINIMUM_GRACE_S, grace_s - int(time.monotonic() - started))


def _spec(pod: Pod | None, name: str) -> Container | None:
    if pod is None:
        return None
    return next((c for c in (*pod.init_containers, *pod.containers) if c.name == name), None)
