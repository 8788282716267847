"""Syncing one pod: read what the runtime has, decide, act, read again.

``inspector.PodInspector`` reads a pod's sandboxes and containers (the kubelet's
PodStatus); ``podactions.compute_actions`` decides what to kill and what to
start; ``PodSyncer`` carries the actions out through the CRI and returns the
pod's runtime state as it is after its own calls, so the parent's cache is fresh
without waiting for a relist.

A sync goes round while its own steps let the pod go further: once a sidecar
runs, or an init container it started has exited, the next container starts in
the same sync. It waits up to a relist period for an init container it started
to exit; a longer one is left to PLEG, as the kubelet leaves it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pkletd.ipc.apimodel.podspec import Container, Pod, PodUID
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.runtime import handlers
from pkletd.ipc.runtime.cri import (
    ContainerID,
    ContainerState,
    CriError,
    SandboxID,
    SandboxSpec,
    unless_gone,
)
from pkletd.supervisor.pods import backoff, ephemeral
from pkletd.supervisor.pods.backoff import CrashBackoff
from pkletd.supervisor.pods.cgroups.podcgroups import PodCgroups
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason
from pkletd.supervisor.pods.images import ImagePuller
from pkletd.supervisor.pods.inspector import PodInspector
from pkletd.supervisor.pods.keyring import NO_NODE_CREDENTIALS, NodeCredentials
from pkletd.supervisor.pods.killing import Killer, pod_address
from pkletd.supervisor.pods.objects import ApiObjects, ObjectUnavailable
from pkletd.supervisor.pods.podactions import Actions, compute_actions
from pkletd.supervisor.pods.podmetrics import ContainerType, PodMetrics
from pkletd.supervisor.pods.runtime import Runtime
from pkletd.supervisor.pods.setup import namespaces, runtimespec
from pkletd.supervisor.pods.setup.envvars import ConfigError, ConfigPending
from pkletd.supervisor.pods.setup.podsetup import Blocked, PodSetup, SandboxConfigError
from pkletd.supervisor.pods.types import (
    PodRuntime,
    SyncOptions,
    SyncResult,
    Waiting,
    WaitingReason,
)

log = logging.getLogger(__name__)

# The kubelet gives a postStart exec no timeout of its own; bound it by a runtime request.
POST_START_TIMEOUT_S = 120
# How long one sync waits, in all, for init containers it started to exit: one
# PLEG relist period, after which the relist would report an exit anyway. A bound
# per sync, so a pod's status is not held back long while its init containers run.
INIT_EXIT_WAIT_S = 1.0
INIT_EXIT_POLL_S = 0.05
NO_OPTIONS = SyncOptions()
FAILED_STEP_RETRY_S = 10.0  # the kubelet's pod worker back-off after a failed sync
# After a failed pull the kubelet syncs again at once (PLEG reports the new
# sandbox), and that sync shows ImagePullBackOff: ErrImagePull is seen only briefly.
PULL_FAILED_RESYNC_S = 1.0
# A pull waiting for a pull secret the API has not given yet looks again this soon (the
# kubelet waits up to a second for its secret cache); the secret's arrival resyncs sooner.
NOT_YET_READ_RETRY_S = 1.0
# Waiting reasons the kubelet's "Failed" event names as such ("Error: ErrImagePull");
# for the others it gives the error's message.
IMAGE_ERRORS = (
    WaitingReason.ERR_IMAGE_PULL,
    WaitingReason.IMAGE_PULL_BACK_OFF,
    WaitingReason.ERR_IMAGE_NEVER_PULL,
)
NO_FAILED_EVENT = (WaitingReason.POST_START_HOOK_ERROR,)  # FailedPostStartHook says it already


@dataclass(frozen=True, slots=True)
class PodSandbox:
    """The sandbox a round's containers start in."""

    id: SandboxID
    spec: SandboxSpec
    ip: str  # "" for a hostNetwork pod


@dataclass(frozen=True, slots=True)
class SandboxFailure:
    """No sandbox this round: why (the containers wait with it), and when to try again."""

    message: str
    retry_s: float


class PodSyncer:
    """Carries out a pod's actions through the CRI. Called on pod-worker threads."""

    def __init__(
        self,
        runtime: Runtime,
        logs_root: Path,
        events: EventRecorder,
        setup: PodSetup,
        cgroups: PodCgroups,
        objects: ApiObjects,
        metrics: PodMetrics,
        clock: Clock = SYSTEM_CLOCK,
        node_credentials: NodeCredentials = NO_NODE_CREDENTIALS,
    ) -> None:
        self._runtime = runtime
        self._metrics = metrics
        self._inspector = PodInspector(runtime)
        self._setup = setup
        self._cgroups = cgroups
        self._logs_root = logs_root
        self._events = events
        self._killer = Killer(runtime, events)
        self._backoff = CrashBackoff(clock=clock)
        self._objects = objects
        self._images = ImagePuller(
            runtime, events, objects, metrics.startup, clock, node_credentials
        )
        self._kills: dict[PodUID, dict[str, tuple[int, str]]] = {}  # uid -> id -> grace, why
        self._kills_lock = threading.Lock()

    def request_kill(self, uid: PodUID, container_id: str, grace_s: int, why: str) -> None:
        """Have the pod's next sync kill this container (a failed liveness or startup probe)."""
        with self._kills_lock:
            self._kills.setdefault(uid, {})[container_id] = (grace_s, why)

    def _take_kills(self, uid: PodUID) -> dict[str, tuple[int, str]]:
        with self._kills_lock:
            return self._kills.pop(uid, {})

    def sync(self, pod: Pod, options: SyncOptions = NO_OPTIONS) -> SyncResult:
        state = self._inspector.inspect(pod.uid)
        if options.kill_grace_s is not None:
            # A pod failed as a whole stops for good: its volumes go with its containers,
            # as the kubelet tears a terminal pod's down (an evicted emptyDir frees disk).
            self._killer.kill_pod(pod, state, options.kill_grace_s)
            self._setup.teardown(pod.uid)
            return SyncResult(pod.uid, self._inspector.inspect(pod.uid), killed=True)
        state = self._kill_requested(pod, state)
        self._cgroups.track(pod)
        waiting: dict[str, Waiting] = {}
        retry: list[float] = []
        blocked = None
        if state.running() or compute_actions(pod, state, options.started).start:
            # A pod with a sandbox had its volumes set up: its files follow its objects.
            blocked = self._mount(pod, retry, remount=state.sandbox() is not None)
        init_names = {c.name for c in pod.init_containers}
        patience = INIT_EXIT_WAIT_S
        for _ in range(len(pod.init_containers) + 1):
            actions = compute_actions(pod, state, options.started)
            if actions.idle:
                break  # ``state`` is what the runtime has: nothing to read again
            started = self._act(pod, state, actions, waiting, retry, blocked)
            patience -= self._await_init_exit(pod, started, patience)
            state = self._inspector.inspect(pod.uid)
            if waiting or not started or not started.keys() <= init_names:
                break
        return SyncResult(pod.uid, state, waiting, min(retry, default=None))

    def _act(
        self,
        pod: Pod,
        state: PodRuntime,
        actions: Actions,
        waiting: dict[str, Waiting],
        retry: list[float],
        blocked: Blocked | None,
    ) -> dict[str, ContainerID]:
        """Carry out one round of actions; the containers it started, by name. Nothing
        starts while the volumes are ``blocked``."""
        if actions.kill_pod:
            self._killer.kill_pod(pod, state, pod.grace_period_s)
        in_spec = {c.name for c in (*pod.init_containers, *pod.containers)}
        for unwanted in actions.kill:
            log.info(
                "killing container pod=%s container=%s reason=spec changed",
                pod.full_name,
                unwanted.name,
            )
            why = f"Container {unwanted.name} definition changed, will be restarted"
            grace = pod.grace_period_s
            self._killer.kill(pod, state, unwanted, grace, why if unwanted.name in in_spec else "")
        if not actions.start:
            return {}
        if blocked is not None:
            waiting.update(
                {c.name: Waiting(blocked.reason, blocked.message) for c in actions.start}
            )
            return {}
        failure = self._cgroups.ensure(pod)  # the pod's cgroup, before its sandbox
        if failure is not None:
            waiting.update(
                {c.name: Waiting(WaitingReason.CONTAINER_CREATING, failure) for c in actions.start}
            )
            retry.append(FAILED_STEP_RETRY_S)
            return {}
        sandbox = self._sandbox_for(pod, state, actions)
        if isinstance(sandbox, SandboxFailure):
            waiting.update(
                {
                    c.name: Waiting(WaitingReason.CONTAINER_CREATING, sandbox.message)
                    for c in actions.start
                }
            )
            retry.append(sandbox.retry_s)
            return {}
        started = {}
        for container in actions.start:
            container_id = self._start(pod, container, state, sandbox, waiting, retry)
            if container_id is not None:
                started[container.name] = container_id
        return started

    def _mount(self, pod: Pod, retry: list[float], remount: bool) -> Blocked | None:
        """Set up the pod's volumes, or bring their files up to date; why they are not,
        recorded as its event (``FailedMount``), with when to try again."""
        blocked = self._setup.blocked(pod, remount)
        if blocked is None:
            return None
        if blocked.event is not None:
            self._events.warning(ObjectRef.of(pod), blocked.event, blocked.message)
        if blocked.retry_s is not None:
            retry.append(blocked.retry_s)
        return blocked

    def _await_init_exit(
        self, pod: Pod, started: Mapping[str, ContainerID], patience: float
    ) -> float:
        """Give an init container just started (not a sidecar) up to ``patience`` seconds
        to finish; the seconds waited."""
        ids = [started[c.name] for c in pod.init_containers if c.name in started and not c.sidecar]
        began = time.monotonic()
        for container_id in ids:
            while time.monotonic() - began < patience and self._running(container_id):
                time.sleep(INIT_EXIT_POLL_S)
        return time.monotonic() - began

    def _running(self, container_id: ContainerID) -> bool:
        state = unless_gone(self._runtime.container_state, container_id)
        return state is ContainerState.RUNNING

    def _kill_requested(self, pod: Pod, state: PodRuntime) -> PodRuntime:
        """Kill containers the prober condemned; the pod's state after."""
        kills = self._take_kills(pod.uid)
        doomed = [c for c in state.running() if c.id in kills]
        for container in doomed:
            log.info(
                "killing container pod=%s container=%s reason=probe failed",
                pod.full_name,
                container.name,
            )
            self._killer.kill(pod, state, container, *kills[container.id])
        return self._inspector.inspect(pod.uid) if doomed else state

    def pod_dirs(self) -> set[PodUID]:
        """The pods with a dir under the root dir's ``pods``."""
        try:
            return {PodUID(p.name) for p in self._setup.node.pods_dir.iterdir() if p.is_dir()}
        except FileNotFoundError:
            return set()

    def unused_cgroups(self, skip: Callable[[PodUID], bool]) -> set[PodUID]:
        """Pods with a cgroup and nothing in it, but for the uids ``skip`` says."""
        return self._cgroups.unused(skip)

    def forget(self, uid: PodUID) -> None:
        self._backoff.forget_pod(uid)
        self._images.forget(uid)
        self._take_kills(uid)
        self._inspector.forget(uid)

    def terminate(self, uid: PodUID, pod: Pod | None, grace_s: int | None) -> SyncResult:
        """Stop and remove everything the runtime has for this pod (``pod`` None: an orphan).

        What is left in the pod's cgroup is killed if the pod is ours (a source's, or our
        runtime's). An orphan cgroup alone may be another agent's pod on a shared host."""
        state = self._inspector.inspect(uid)
        grace = state.grace_period() if grace_s is None else grace_s
        self._killer.kill_pod(pod, state, grace)
        # what the pod's last status says (an orphan has none)
        stopped = self._inspector.inspect(uid) if pod is not None else PodRuntime(uid)
        name = pod.full_name if pod is not None else uid
        for container in state.containers:
            unless_gone(self._runtime.remove_container, container.id)
        for sandbox in state.sandboxes:
            unless_gone(self._runtime.remove_sandbox, sandbox.id)
        self._setup.teardown(uid)
        ours = pod is not None or bool(state.sandboxes)
        self._cgroups.remove(uid, kill=ours)  # after its containers and sandboxes
        log.info("pod terminated pod=%s uid=%s", name, uid)
        return SyncResult(uid, stopped, terminated=True)

    def _sandbox_for(
        self, pod: Pod, state: PodRuntime, actions: Actions
    ) -> PodSandbox | SandboxFailure:
        """The sandbox to start containers in, created if need be; its config is made
        anew each time, as the kubelet's."""
        if not actions.create_sandbox:
            sandbox = state.sandbox()
            assert sandbox is not None
            spec = runtimespec.sandbox_spec(pod, sandbox.attempt, self._logs_root)
            try:
                return PodSandbox(sandbox.id, self._setup.sandbox_spec(pod, spec), sandbox.ip)
            except SandboxConfigError as exc:  # the running sandbox's config cannot be made
                log.error("sandbox config failed pod=%s error=%s", pod.full_name, exc)
                return SandboxFailure(f"Failed to create pod sandbox: {exc}", FAILED_STEP_RETRY_S)
        spec = runtimespec.sandbox_spec(pod, actions.sandbox_attempt, self._logs_root)
        try:
            handler = self._objects.runtime_handler(pod.runtime_class)
            spec = self._setup.sandbox_spec(pod, dataclasses.replace(spec, runtime_handler=handler))
        except ObjectUnavailable as exc:
            if exc.pending:  # not listed yet: no attempt, as for an object not read yet
                return SandboxFailure("", NOT_YET_READ_RETRY_S)
            return self._sandbox_failed(pod, str(exc), exc)
        except SandboxConfigError as exc:
            return self._sandbox_failed(pod, str(exc), exc)
        Path(spec.log_directory).mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self._metrics.started_pods.inc()
        try:
            sandbox_id = self._runtime.run_sandbox(spec)
        except CriError as exc:
            self._metrics.started_pods_errors.inc()
            return self._sandbox_failed(pod, exc.status_text, exc)
        log.info(
            "sandbox started pod=%s attempt=%d sandbox=%s handler=%s ms=%.0f",
            pod.full_name,
            spec.attempt,
            sandbox_id[:13],
            spec.runtime_handler or "default",
            (time.monotonic() - started) * 1000,
        )
        ip = "" if pod.host_network else self._runtime.sandbox_status(sandbox_id).ip
        return PodSandbox(sandbox_id, spec, ip)

    def _sandbox_failed(self, pod: Pod, error: str, cause: Exception) -> SandboxFailure:
        """The kubelet's ``FailedCreatePodSandBox``: an event, and the next sync tries again."""
        log.error("sandbox failed pod=%s error=%s", pod.full_name, cause)
        message = f"Failed to create pod sandbox: {error}"
        self._events.warning(ObjectRef.of(pod), Reason.FAILED_CREATE_POD_SANDBOX, message)
        return SandboxFailure(message, FAILED_STEP_RETRY_S)

    def _start(
        self,
        pod: Pod,
        container: Container,
        state: PodRuntime,
        sandbox: PodSandbox,
        waiting: dict[str, Waiting],
        retry: list[float],
    ) -> ContainerID | None:
        """Start one container; its id, or None with why in ``waiting``."""
        previous = state.latest(container.name)
        restart_count = previous.attempt + 1 if previous is not None else 0
        if previous is not None and previous.state is not ContainerState.RUNNING:
            key = backoff.key(pod.uid, container.name, container.hash)
            wait = self._backoff.remaining(key, previous.finished_at / 1e9)
            if wait > 0:
                where = f"{pod.name}_{pod.namespace}({pod.uid})"
                message = (
                    f"back-off {self._backoff.current(key):.0f}s restarting failed "
                    f"container={container.name} pod={where}"
                )
                self._events.warning(
                    ObjectRef.of(pod, container.name),
                    Reason.BACK_OFF,
                    f"Back-off restarting failed container {container.name} in pod {where}",
                )
                waiting[container.name] = Waiting(WaitingReason.CRASH_LOOP_BACK_OFF, message)
                retry.append(wait)
                return None
            self._backoff.restarted(key)
        kind = ContainerType.of(pod, container)
        pull_wait = self._images.backoff_left(pod, container)
        if pull_wait > 0:
            self._metrics.started_containers.inc(kind)
            waiting[container.name] = self._failed(
                pod, container, self._images.backing_off(pod, container)
            )
            self._metrics.started_containers_errors.inc(kind, WaitingReason.IMAGE_PULL_BACK_OFF)
            retry.append(pull_wait)
            return None
        outcome = self._create_and_start(pod, container, restart_count, sandbox, state)
        if isinstance(outcome, Waiting) and outcome.reason is WaitingReason.CONTAINER_CREATING:
            waiting[container.name] = outcome  # no failure: an object it needs is not read yet
            retry.append(NOT_YET_READ_RETRY_S)
            return None  # not an attempt: the kubelet's synchronous GET would wait inside one
        self._metrics.started_containers.inc(kind)
        if isinstance(outcome, Waiting):
            waiting[container.name] = self._failed(pod, container, outcome)
            self._metrics.started_containers_errors.inc(kind, outcome.reason)
            pulling = outcome.reason is WaitingReason.ERR_IMAGE_PULL
            retry.append(PULL_FAILED_RESYNC_S if pulling else FAILED_STEP_RETRY_S)
            return None
        return outcome

    def _failed(self, pod: Pod, container: Container, why: Waiting) -> Waiting:
        """Record the kubelet's ``Failed`` event for a container that could not start."""
        if why.reason not in NO_FAILED_EVENT:
            detail = why.reason if why.reason in IMAGE_ERRORS else why.message
            self._events.warning(
                ObjectRef.of(pod, container.name), Reason.FAILED, f"Error: {detail}"
            )
        return why

    def _create_and_start(
        self,
        pod: Pod,
        container: Container,
        restart_count: int,
        sandbox: PodSandbox,
        state: PodRuntime,
    ) -> ContainerID | Waiting:
        image = self._images.ensure(pod, container, sandbox.spec)
        if isinstance(image, Waiting):
            return image
        where = ObjectRef.of(pod, container.name)
        spec = runtimespec.container_spec(pod, container, restart_count)
        try:
            target = ephemeral.target_id(container, state)
            spec = dataclasses.replace(
                spec, namespaces=namespaces.container_namespaces(pod, target)
            )
            spec = self._setup.container_spec(pod, container, spec, sandbox.ip, image)
        except ConfigPending as exc:
            log.info("config waits pod=%s container=%s for=%s", pod.full_name, container.name, exc)
            return Waiting(WaitingReason.CONTAINER_CREATING, "")
        except ConfigError as exc:
            log.error(
                "config failed pod=%s container=%s error=%s", pod.full_name, container.name, exc
            )
            return Waiting(WaitingReason.CREATE_CONTAINER_CONFIG_ERROR, str(exc))
        try:
            container_id = self._runtime.create_container(sandbox.id, spec, sandbox.spec)
        except CriError as exc:
            log.error(
                "create failed pod=%s container=%s error=%s", pod.full_name, container.name, exc
            )
            return Waiting(WaitingReason.CREATE_CONTAINER_ERROR, exc.detail)
        self._events.normal(where, Reason.CREATED, f"Created container {container.name}")
        try:
            self._runtime.start_container(container_id)
        except CriError as exc:
            log.error(
                "start failed pod=%s container=%s error=%s", pod.full_name, container.name, exc
            )
            return Waiting(WaitingReason.RUN_CONTAINER_ERROR, exc.detail)
        self._events.normal(where, Reason.STARTED, f"Started container {container.name}")
        log.info(
            "container started pod=%s container=%s restart=%d id=%s",
            pod.full_name,
            container.name,
            restart_count,
            container_id[:13],
        )
        if container.post_start is not None:
            failure = self._post_start(pod, container, container_id, sandbox.ip)
            if failure is not None:
                return failure
        return container_id

    def _post_start(
        self, pod: Pod, container: Container, container_id: ContainerID, sandbox_ip: str
    ) -> Waiting | None:
        """Run the postStart hook; on failure kill the container, as the kubelet does."""
        assert container.post_start is not None
        hook = dataclasses.replace(container.post_start, timeout_s=POST_START_TIMEOUT_S)
        target = handlers.Target(container, container_id, pod_address(pod, sandbox_ip))
        outcome = handlers.run(hook, target, self._runtime)
        if outcome.ok:
            return None
        message = f"PostStartHook failed: {outcome.output}"
        self._events.warning(
            ObjectRef.of(pod, container.name), Reason.FAILED_POST_START_HOOK, message
        )
        state = self._inspector.inspect(pod.uid)  # the container to kill, for preStop too
        info = next((c for c in state.containers if c.id == container_id), None)
        if info is not None:
            self._killer.kill(pod, state, info, pod.grace_period_s, "FailedPostStartHook")
        return Waiting(WaitingReason.POST_START_HOOK_ERROR, message)
