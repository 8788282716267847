"""The syncLoop's pod side: sources in, pod workers out, results folded back.

Owned by the supervisor's loop thread. ``SyncLoop`` turns what the workers report
(pod sets from the sources, PLEG events, probe results) into pod syncs and
terminations on the pod workers, folds each sync's result into the pods' status
(published at once: no relist tax), requeues pods (backoff, activeDeadlineSeconds,
``syncFrequency``), and every ``HOUSEKEEPING_S`` terminates orphans: sandboxes no
source wants, once every source has spoken.

The API objects pods reference (``ApiObjects``) are kept up to date from the
pod-objects worker; a change syncs again exactly the pods that reference it, so their
volumes are rewritten (and a container waiting for it starts) at once, not at the
next ``syncFrequency``.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apimodel.podenums import RestartPolicy
from pkletd.ipc.apimodel.podspec import Pod, PodUID
from pkletd.ipc.apimodel.probespec import ProbeType
from pkletd.ipc.apimodel.references import ObjectKey, PodReferences, references
from pkletd.ipc.bus.messages import (
    EvictionNeeded,
    Message,
    ObjectFetched,
    PodForgotten,
    PodLifecycleEvent,
    PodsListed,
    PodStatusUpdated,
    PodTerminated,
    ProbeMetrics,
    ProbeResult,
    ProbeVerdict,
    RuntimeClassesListed,
    ServicesListed,
    TokenIssued,
)
from pkletd.ipc.runtime.cri import CriError
from pkletd.supervisor.pods import admission, eviction
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason
from pkletd.supervisor.pods.objects import ApiObjects, issued_id, token_id
from pkletd.supervisor.pods.podmetrics import PodMetrics, SyncType
from pkletd.supervisor.pods.podsync import FAILED_STEP_RETRY_S, PodSyncer
from pkletd.supervisor.pods.podworkers import PodWorkers
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.runtime import Runtime
from pkletd.supervisor.pods.stage import PodStage
from pkletd.supervisor.pods.types import Failure, SyncOptions, SyncResult

log = logging.getLogger(__name__)

HOUSEKEEPING_S = 2.0
DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
PROBE_RESULT_TTL_S = 10.0  # an older result is history, not a reason to act
DEFAULT_NAMESPACE = "default"  # its Services (the master service) reach every pod

Publish = Callable[[Message], object]


@dataclass(frozen=True, slots=True)
class Parts:
    """What the sync loop works with; built by the supervisor."""

    runtime: Runtime
    syncer: PodSyncer
    pod_workers: PodWorkers
    pods: Pods
    probes: ProbeResults
    events: EventRecorder
    admitter: admission.Admitter
    sync_frequency: float
    objects: ApiObjects
    metrics: PodMetrics


class SyncLoop:
    def __init__(self, parts: Parts, publish: Publish) -> None:
        self._runtime = parts.runtime
        self._syncer = parts.syncer
        self._pod_workers = parts.pod_workers
        self._pods = parts.pods
        self._probes = parts.probes
        self._events = parts.events
        self._admitter = parts.admitter
        self._sync_frequency = parts.sync_frequency
        self._objects = parts.objects
        self._references: dict[PodUID, tuple[Pod, PodReferences]] = {}
        self._metrics = parts.metrics
        # pods whose first sync (SyncType.CREATE) is queued: a later sync that replaces the
        # queued work keeps its type, as the kubelet's pod workers keep SyncPodCreate
        self._creating: set[PodUID] = set()
        self._publish = publish
        self._requeue: list[tuple[float, PodUID]] = []
        self._due: dict[PodUID, float] = {}
        self._cgroup_orphans: set[PodUID] = set()  # pod cgroups with no pod, at the last pass
        self._dir_orphans: set[PodUID] = set()  # pod dirs with no pod, at the last pass
        self._next_housekeeping = 0.0
        self.stopping = False
        self.runtime_ok = True

    def tick(self, now: float) -> float:
        """Requeued syncs and housekeeping that are due; the next deadline."""
        next_requeue = self.run_requeues(now)
        if now >= self._next_housekeeping and not self.stopping:
            self.housekeeping()
            self._next_housekeeping = now + HOUSEKEEPING_S
        return min(next_requeue, self._next_housekeeping)

    def on_probe_metrics(self, message: ProbeMetrics) -> None:
        self._probes.metrics = message.samples
        self._publish(message)

    def on_object_fetched(self, message: ObjectFetched) -> None:
        if not self._objects.on_fetched(message):
            return
        key = ObjectKey(message.object_kind, message.namespace, message.name)
        # a volume, CSIDriver or attachment read after the claim is waited for as well
        self._sync_referencing(lambda refs: key in self._objects.reached(refs.objects))

    def on_token_issued(self, message: TokenIssued) -> None:
        if not self._objects.on_token(message):
            return
        issued = issued_id(message)
        self._sync_referencing(lambda refs: any(token_id(t) == issued for t in refs.tokens))

    def on_services_listed(self, message: ServicesListed) -> None:
        """Services only make variables for containers yet to start: sync the pods of the
        namespace (every pod's, for ``default``) that have a container waiting."""
        if not self._objects.on_services(message):
            return
        for pod in self._pods.active():
            seen = message.namespace in (pod.namespace, DEFAULT_NAMESPACE)
            if seen and self._pods.waiting(pod.uid):
                self._sync(pod)

    def on_runtime_classes_listed(self, message: RuntimeClassesListed) -> None:
        """Sync the pods whose RuntimeClass came, went or changed: one waiting for its
        class creates its sandbox now."""
        changed = self._objects.on_runtime_classes(message)
        for pod in self._pods.active():
            if pod.runtime_class and pod.runtime_class in changed:
                self._sync(pod)

    def _sync_referencing(self, wanted: Callable[[PodReferences], bool]) -> None:
        for pod in self._pods.active():
            if wanted(self._references_of(pod)):
                self._sync(pod)

    def _references_of(self, pod: Pod) -> PodReferences:
        cached = self._references.get(pod.uid)
        if cached is None or cached[0] is not pod:
            cached = (pod, references(pod.raw))
            self._references[pod.uid] = cached
        return cached[1]

    def _forget_objects(self) -> None:
        """Drop the objects, tokens and Services no active pod needs any more."""
        active = self._pods.active()
        self._references = {
            p.uid: self._references[p.uid] for p in active if p.uid in self._references
        }
        self._objects.keep_only(
            (self._references_of(p) for p in active),
            {p.namespace for p in active} | {DEFAULT_NAMESPACE},
        )

    def on_pod_workers(self) -> None:
        for uid, outcome in self._pod_workers.completed():
            self.on_sync_done(uid, outcome)

    def status(self, events: bool) -> dict[str, Any]:
        found: dict[str, Any] = {"pods": self._pods.summary()}
        if events:
            found["events"] = self._events.recent()
        return found

    def on_pods_listed(self, message: PodsListed) -> None:
        change = self._pods.set_source(message.source, message.pods)
        for pod in change.sync:
            stage = self._pods.stage(pod.uid)
            new = stage is PodStage.NEW and not pod.finished
            if stage is PodStage.ACTIVE:
                self._sync(pod, SyncType.UPDATE)
            elif new and self._admit(pod):  # a rejected, failed or finished pod is not started
                self._metrics.startup.seen(pod)
                self._sync(pod, SyncType.CREATE)
        for pod in change.terminate:
            self._terminate(pod.uid, pod, pod.grace_period_s)

    def _admit(self, pod: Pod) -> bool:
        rejection = self._admitter.admit(pod, self._pods.active())
        if rejection is None:
            self._pods.admit(pod.uid)
            return True
        self._events.warning(ObjectRef.of(pod), rejection.reason, rejection.message)
        api_pod = self._pods.reject(pod.uid, rejection.reason.value, rejection.message)
        if api_pod is not None:
            self._publish(PodStatusUpdated(api_pod))
        return False

    def on_lifecycle_event(self, event: PodLifecycleEvent) -> None:
        uid = event.pod_uid or self._pods.owner(event.object_id)
        if not uid:
            return  # an object of no pod we know: housekeeping finds real orphans
        pod = self._pods.get(uid)
        if pod is not None:
            if not self._pods.already_seen(uid, event):
                self._show_exit(uid, event)
                self._sync(pod)
        elif event.state and self._pods.sources_ready and not self._pods.terminating(uid):
            # an object of a pod no source wants; not a removal (the last of a pod just
            # forgotten: nothing is left of it)
            self._pods.orphaned(uid)
            self._terminate(uid, None, None)

    def _show_exit(self, uid: PodUID, event: PodLifecycleEvent) -> None:
        """Publish the exit a ``ContainerDied`` carries in the pod's status now, before the
        sync that acts on it (a restart, the sandbox's stop) writes to the runtime."""
        api_pod = self._pods.exited(uid, event)
        if api_pod is not None:
            self._publish(PodStatusUpdated(api_pod))

    def on_probe_result(self, result: ProbeResult, sent_at: float) -> None:
        """Act on a probe's new state, if it is fresh and about the running container."""
        pod = self._pods.get(result.pod_uid)
        if pod is None or time.monotonic() - sent_at > PROBE_RESULT_TTL_S:
            return
        if self._pods.running_id(result.pod_uid, result.container) != result.container_id:
            return  # about a container that is gone or replaced
        if not self._probes.record(result):
            return
        kind = result.probe.capitalize()
        failed = result.result is ProbeVerdict.FAILURE
        if failed:
            where = ObjectRef.of(pod, result.container)
            self._events.warning(where, Reason.UNHEALTHY, f"{kind} probe failed: {result.output}")
        if failed and result.probe in (ProbeType.LIVENESS, ProbeType.STARTUP):
            self._kill_unhealthy(pod, result)
            return
        if result.probe is ProbeType.STARTUP:
            self._sync(pod)  # a started sidecar lets the next init container go
        api_pod = self._pods.refresh(pod.uid)
        if api_pod is not None:
            self._publish(PodStatusUpdated(api_pod))

    def _kill_unhealthy(self, pod: Pod, result: ProbeResult) -> None:
        container = next((c for c in pod.containers if c.name == result.container), None)
        if container is None:
            return
        probe = container.probe(result.probe)
        grace = pod.grace_period_s
        if probe is not None and probe.termination_grace_s is not None:
            grace = probe.termination_grace_s
        why = f"Container {container.name} failed {result.probe} probe"
        if pod.restart_policy is not RestartPolicy.NEVER:
            why += ", will be restarted"
        self._syncer.request_kill(pod.uid, result.container_id, grace, why)
        self._sync(pod)

    def _sync(self, pod: Pod, why: SyncType = SyncType.SYNC) -> None:
        if why is SyncType.CREATE:
            self._creating.add(pod.uid)
        elif pod.uid in self._creating:
            why = SyncType.CREATE  # its first sync has not run yet: this work replaces it
        self._check_deadline(pod)
        options = SyncOptions(self._probes.passed_startup(pod.uid), self._pods.kill_grace(pod.uid))
        urgent = self._pods.has_run(pod.uid)  # a pod already running goes before new ones
        self._pod_workers.update(pod.uid, lambda: self._timed_sync(pod, options, why), urgent)

    def _timed_sync(self, pod: Pod, options: SyncOptions, why: SyncType) -> SyncResult:
        """A pod worker's sync of the pod, its duration recorded."""
        started = time.monotonic()
        if why is SyncType.CREATE:
            self._creating.discard(pod.uid)
        try:
            return self._syncer.sync(pod, options)
        finally:
            self._metrics.sync_duration.observe(time.monotonic() - started, why)

    def _check_deadline(self, pod: Pod) -> None:
        """activeDeadlineSeconds: past it, the pod fails and its containers stop."""
        left = self._pods.deadline_left(pod.uid)
        if left is None or left > 0:
            return
        failure = Failure(DEADLINE_EXCEEDED, DEADLINE_MESSAGE)
        if self._pods.fail(pod.uid, failure, pod.grace_period_s):
            self._events.normal(ObjectRef.of(pod), Reason.DEADLINE_EXCEEDED, DEADLINE_MESSAGE)

    # --- what a node shutdown asks (``supervisor/node/shutdown.py``) ----------------

    def fail_pod(self, pod: Pod, failure: Failure, grace_s: int) -> None:
        """Fail an active pod as a whole and stop its containers within ``grace_s``."""
        if self._pods.fail(pod.uid, failure, grace_s):
            api_pod = self._pods.refresh(pod.uid)
            if api_pod is not None:
                self._publish(PodStatusUpdated(api_pod))
        self._sync(pod)

    def pod_stopped(self, uid: PodUID) -> bool:
        """A failed pod's containers are stopped, or the pod is gone."""
        return self._pods.stopped(uid)

    def active_pods(self) -> list[Pod]:
        return self._pods.active()

    def refuse_pods(self, refusal: admission.Rejection | None) -> None:
        """Refuse every new pod with this (None: admit them again)."""
        self._admitter.refusal = refusal

    # --- what the eviction worker reports (``workers/eviction``) ----------------------

    def under_pressure(self, conditions: tuple[str, ...]) -> None:
        """The node's pressure conditions in force: new pods are admitted against them."""
        self._admitter.pressure = conditions

    def evict(self, needed: EvictionNeeded, max_pod_grace_s: int) -> None:
        """Evict one pod, the first of the kubelet's ranking that may be evicted: Failed,
        ``Evicted``, its containers stopped within the eviction's grace period. With
        ``needed.limits``, each pod over its local storage limits instead."""
        if needed.limits:
            self._evict_over_limits(needed)
            return
        active = self._pods.active()
        chosen = eviction.choose(active, needed, self._admitter.requests, max_pod_grace_s)
        if not active:
            log.error("eviction thresholds met, but no pods are active to evict")
            return
        if chosen is None:
            log.info("unable to evict any pod: all critical pods=%d", len(active))
            return
        self._evict(chosen, needed.resource, needed.signal)

    def _evict_over_limits(self, needed: EvictionNeeded) -> None:
        evictions, critical = eviction.over_limits(self._pods.active(), needed.limits)
        for pod in critical:
            log.error("cannot evict a critical pod pod=%s uid=%s", pod.full_name, pod.uid)
        signals = {exceeded["uid"]: exceeded["signal"] for exceeded in needed.limits}
        for chosen in evictions:
            self._evict(chosen, needed.resource, signals[chosen.pod.uid])

    def _evict(self, chosen: eviction.Eviction, resource: str, signal: str) -> None:
        pod = chosen.pod
        log.warning(
            "evicting pod pod=%s uid=%s resource=%s signal=%s grace=%ds",
            pod.full_name,
            pod.uid,
            resource,
            signal,
            chosen.grace_s,
        )
        self._events.warning(ObjectRef.of(pod), Reason.EVICTED, chosen.message)
        failure = Failure(Reason.EVICTED.value, chosen.message, disruption=chosen.disruption)
        self.fail_pod(pod, failure, chosen.grace_s)

    def _terminate(self, uid: PodUID, pod: Pod | None, grace: int | None) -> None:
        self._pod_workers.update(uid, lambda: self._syncer.terminate(uid, pod, grace), True)

    def on_sync_done(self, uid: PodUID, outcome: SyncResult | BaseException) -> None:
        if isinstance(outcome, BaseException):
            log.error("pod sync failed uid=%s error=%s", uid, outcome)
            self._schedule(uid, FAILED_STEP_RETRY_S)
            return
        if outcome.terminated:
            last = self._pods.final_status(outcome)
            if last is not None:  # written before the final delete, as the kubelet does
                self._publish(PodStatusUpdated(last))
            self._syncer.forget(uid)
            self._probes.forget(uid)
            self._admitter.forget(uid)
            self._metrics.startup.forget(uid)
            if self._pods.forget(uid):
                self._publish(PodForgotten(uid))
                self._forget_objects()  # a next pod on its claim reads its attachment anew
                final = self._pods.final_delete(uid)
                if final is not None:
                    self._publish(PodTerminated(uid, final["namespace"], final["name"]))
            else:
                self._schedule(uid, 0.0)  # it came back while we were stopping it
            return
        api_pod = self._pods.record(outcome)
        if api_pod is not None:
            self._metrics.startup.status(uid, api_pod, outcome.runtime)
            self._publish(PodStatusUpdated(api_pod, self._pods.objects(uid)))
        delays = [self._sync_frequency]
        if outcome.retry_in is not None:
            delays.append(outcome.retry_in)
        left = self._pods.deadline_left(uid)
        if left is not None and left > 0:
            delays.append(left)
        self._schedule(uid, min(delays))

    def _schedule(self, uid: PodUID, delay: float) -> None:
        due = time.monotonic() + delay
        if self._due.get(uid, float("inf")) <= due:
            return
        self._due[uid] = due
        heapq.heappush(self._requeue, (due, uid))

    def run_requeues(self, now: float) -> float:
        while self._requeue and self._requeue[0][0] <= now:
            due, uid = heapq.heappop(self._requeue)
            if self._due.get(uid) != due:
                continue
            del self._due[uid]
            if self.stopping:
                continue
            pod = self._pods.get(uid)
            if pod is not None:
                self._sync(pod)
            elif self._pods.terminating(uid):  # its termination failed: try it again
                removed = self._pods.removed(uid)
                self._terminate(uid, removed, removed.grace_period_s if removed else None)
        return self._requeue[0][0] if self._requeue else now + 60.0

    def housekeeping(self) -> None:
        """Terminate pods the runtime runs that no source wants (after every source spoke),
        and pod cgroups and pod dirs left with no pod and no sandbox (the kubelet's
        cleanupOrphanedPodCgroups and cleanupOrphanedPodDirs). Forget API objects no pod
        references."""
        self._forget_objects()
        try:
            sandboxes = self._runtime.list_sandboxes()
            self.runtime_ok = True
        except CriError as exc:
            log.error("housekeeping: runtime list failed error=%s", exc)
            self.runtime_ok = False
            return
        if not self._pods.sources_ready:
            return
        for sandbox in sandboxes:
            if sandbox.uid and self._unowned(sandbox.uid):
                log.info(
                    "orphaned pod found pod=%s/%s uid=%s",
                    sandbox.namespace,
                    sandbox.name,
                    sandbox.uid,
                )
                self._pods.orphaned(PodUID(sandbox.uid))
                self._terminate(PodUID(sandbox.uid), None, None)
        self._orphaned_cgroups({s.uid for s in sandboxes})
        self._orphaned_pod_dirs({s.uid for s in sandboxes})

    def _orphaned_cgroups(self, with_sandbox: set[str]) -> None:
        """Remove a pod cgroup seen on two passes in a row with nothing in it, no pod and
        no sandbox (a pod's cgroup is made just before its sandbox)."""
        orphans = self._syncer.unused_cgroups(
            lambda uid: uid in with_sandbox or not self._unowned(uid)
        )
        for uid in orphans & self._cgroup_orphans:
            log.info("orphaned pod cgroup found uid=%s", uid)
            self._pods.orphaned(uid)
            self._terminate(uid, None, None)
        self._cgroup_orphans = orphans

    def _orphaned_pod_dirs(self, with_sandbox: set[str]) -> None:
        """Terminate what is left in a pod dir seen on two passes in a row with no pod and
        no sandbox (the kubelet's ``cleanupOrphanedPodDirs``): its CSI volumes are
        unpublished through their drivers, then the dir goes."""
        orphans = {
            uid for uid in self._syncer.pod_dirs() if uid not in with_sandbox and self._unowned(uid)
        }
        for uid in orphans & self._dir_orphans:
            log.info("orphaned pod dir found uid=%s", uid)
            self._pods.orphaned(uid)
            self._terminate(uid, None, None)
        self._dir_orphans = orphans

    def _unowned(self, uid: PodUID) -> bool:
        """No source wants the pod, and nothing is under way for it."""
        return (
            self._pods.get(uid) is None
            and not self._pods.terminating(uid)
            and not self._pod_workers.busy(uid)
        )
