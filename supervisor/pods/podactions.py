"""What a pod needs done, decided from what the runtime has: the kubelet's computePodActions.

Pure functions over ``PodRuntime`` (a pod's sandboxes and containers, newest
first). The rules, as the kubelet applies them:

- A pod whose sandbox is gone or unusable gets a new sandbox (the next attempt)
  and starts over from its first init container; a ``Never`` pod that already ran
  is only torn down, and an ``OnFailure`` pod does not rerun what succeeded.
- Init containers run one at a time, in order, each to success; a failed one is
  retried unless the pod is ``Never`` (then the pod fails). A sidecar (an init
  container with ``restartPolicy: Always``) must be running, and past its startup
  probe if it has one, before the next init container starts; it is restarted
  whenever it exits, for the pod's whole life.
- Regular containers start once initialization is done, and are restarted under
  the pod's restartPolicy. A running container whose spec hash differs from its
  spec is replaced; one no longer in the spec is killed.
- A pod whose regular containers are all done (``Never``, or ``OnFailure`` and
  all succeeded) is torn down: sidecars and sandbox stop.
- Ephemeral containers with no instance yet start first, in a usable sandbox, even
  while init containers run; one that ran is never started again (``ephemeral``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pkletd.ipc.apimodel.podenums import RestartPolicy
from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.apimodel.probespec import ProbeType
from pkletd.ipc.runtime.cri import ContainerInfo, ContainerState, SandboxInfo, SandboxState
from pkletd.supervisor.pods import ephemeral
from pkletd.supervisor.pods.setup import runtimespec
from pkletd.supervisor.pods.types import PodRuntime


@dataclass(frozen=True, slots=True)
class Actions:
    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_attempt: int = 0
    kill: tuple[ContainerInfo, ...] = ()
    start: tuple[Container, ...] = ()
    init_failed: bool = False

    @property
    def idle(self) -> bool:
        return not (self.kill_pod or self.create_sandbox or self.kill or self.start)


@dataclass(frozen=True, slots=True)
class InitProgress:
    done: bool
    next: Container | None = None
    failed: bool = False
    incomplete: tuple[str, ...] = ()


def should_restart(pod: Pod, container: ContainerInfo) -> bool:
    if pod.restart_policy is RestartPolicy.ALWAYS:
        return True
    return pod.restart_policy is RestartPolicy.ON_FAILURE and container.exit_code != 0


def pod_done(pod: Pod, state: PodRuntime) -> bool:
    """Every regular container ran and none is to be restarted."""
    if pod.restart_policy is RestartPolicy.ALWAYS:
        return False
    for container in pod.containers:
        latest = state.latest(container.name)
        if latest is None or latest.state is not ContainerState.EXITED:
            return False
        if should_restart(pod, latest):
            return False
    return True


def started(container: Container, info: ContainerInfo | None, passed: frozenset[str]) -> bool:
    """Running, and past its startup probe if it has one (``passed``: ids that passed it)."""
    if info is None or info.state is not ContainerState.RUNNING:
        return False
    return container.probe(ProbeType.STARTUP) is None or info.id in passed


def init_progress(
    pod: Pod, state: PodRuntime, passed: frozenset[str] = frozenset()
) -> InitProgress:
    """How far initialization got: the next init container to start, or done, or failed."""
    if any(state.latest(c.name) is not None for c in pod.containers):
        return InitProgress(done=True)  # regular containers ran: initialization is behind us
    incomplete = tuple(c.name for c in pod.init_containers if not _complete(c, state, passed))
    for container in pod.init_containers:
        latest = state.latest(container.name)
        if container.sidecar:
            if started(container, latest, passed):
                continue
            running = latest is not None and latest.state is ContainerState.RUNNING
            return InitProgress(False, None if running else container, incomplete=incomplete)
        if latest is None or latest.state is ContainerState.CREATED:
            return InitProgress(False, container, incomplete=incomplete)
        if latest.state is ContainerState.RUNNING:
            return InitProgress(False, incomplete=incomplete)
        if latest.exit_code == 0:
            continue
        if pod.restart_policy is RestartPolicy.NEVER:
            return InitProgress(False, failed=True, incomplete=incomplete)
        return InitProgress(False, container, incomplete=incomplete)
    return InitProgress(done=True)


def _complete(container: Container, state: PodRuntime, passed: frozenset[str]) -> bool:
    latest = state.latest(container.name)
    if container.sidecar:
        return started(container, latest, passed)
    return latest is not None and latest.state is ContainerState.EXITED and latest.exit_code == 0


def _sandbox_usable(pod: Pod, sandbox: SandboxInfo | None) -> bool:
    if sandbox is None or sandbox.state is not SandboxState.READY:
        return False
    if sandbox.host_network is not None and sandbox.host_network != pod.host_network:
        return False  # the network namespace changed: the kubelet makes a new sandbox
    return pod.host_network or bool(sandbox.ip)


def compute_actions(pod: Pod, state: PodRuntime, passed: frozenset[str] = frozenset()) -> Actions:
    sandbox = state.sandbox()
    usable = _sandbox_usable(pod, sandbox)
    if pod_done(pod, state):
        return Actions(kill_pod=bool(state.running()) or usable)
    if not usable:
        return _new_sandbox(pod, state, sandbox)
    kill = _unwanted(pod, state)
    progress = init_progress(pod, state, passed)
    if progress.failed:
        return Actions(kill_pod=True, init_failed=True)
    start = [*ephemeral.pending(pod, state), *_changed(pod.init_containers, state, kill)]
    if not progress.done:
        if progress.next is not None and progress.next not in start:
            start.append(progress.next)
        return Actions(kill=tuple(kill), start=tuple(start))
    for sidecar in pod.sidecars:
        latest = state.latest(sidecar.name)
        if sidecar not in start and (latest is None or latest.state is not ContainerState.RUNNING):
            start.append(sidecar)
    start += _changed(pod.containers, state, kill)
    for container in pod.containers:
        latest = state.latest(container.name)
        if container in start:
            continue
        if (
            latest is None
            or latest.state is ContainerState.CREATED
            or (latest.state is not ContainerState.RUNNING and should_restart(pod, latest))
        ):
            start.append(container)
    return Actions(kill=tuple(kill), start=tuple(start))


def _new_sandbox(pod: Pod, state: PodRuntime, sandbox: SandboxInfo | None) -> Actions:
    if sandbox is not None and pod.restart_policy is RestartPolicy.NEVER and state.containers:
        return Actions(kill_pod=True)  # the kubelet never reruns a Never pod's containers
    if pod.init_containers:
        start: tuple[Container, ...] = (pod.init_containers[0],)
    else:
        start = tuple(c for c in pod.containers if not _succeeded_once(pod, c, state))
    return Actions(
        kill_pod=sandbox is not None,
        create_sandbox=True,
        sandbox_attempt=sandbox.attempt + 1 if sandbox is not None else 0,
        start=start,
    )


def _succeeded_once(pod: Pod, container: Container, state: PodRuntime) -> bool:
    latest = state.latest(container.name)
    return (
        pod.restart_policy is RestartPolicy.ON_FAILURE
        and latest is not None
        and latest.state is ContainerState.EXITED
        and latest.exit_code == 0
    )


def _unwanted(pod: Pod, state: PodRuntime) -> list[ContainerInfo]:
    names = {c.name for c in (*pod.init_containers, *pod.containers, *pod.ephemeral_containers)}
    return [c for c in state.running() if c.name not in names]


def _changed(
    containers: tuple[Container, ...], state: PodRuntime, kill: list[ContainerInfo]
) -> list[Container]:
    """Running containers whose spec changed: killed (added to ``kill``) and started again."""
    changed = []
    for container in containers:
        latest = state.latest(container.name)
        if latest is None or latest.state is not ContainerState.RUNNING:
            continue
        if latest.annotations.get(runtimespec.CONTAINER_HASH) != container.hash:
            kill.append(latest)
            changed.append(container)
    return changed
