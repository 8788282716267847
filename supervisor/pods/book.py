"""The parent's book of pods: what the sources want, what the runtime has, what we report.

Owned by the loop thread. Sources send whole sets (``PodsListed``); ``set_source``
turns a set into the pods to sync and the pods to terminate. Each pod's stage is
its ``PodLifecycle`` (``stage``); orphans the loop terminates have a lifecycle
here too, with no pod. Sync results land in
``record``, which recomputes the API status and says whether it changed, so the
loop publishes only real changes; a container's exit PLEG reports lands in
``exited`` at once, before the sync that acts on it (``podexits``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pkletd.ipc.apimodel.podenums import TERMINAL_PHASES, PodPhase, PodSource
from pkletd.ipc.apimodel.podspec import InvalidPod, Pod, PodUID, parse_pod, refused_pod
from pkletd.ipc.bus.messages import SANDBOX_PREFIX, LifecycleEventType, PodLifecycleEvent
from pkletd.ipc.runtime.cri import ContainerState
from pkletd.supervisor.pods import podexits, podstatus
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.stage import PodLifecycle, PodStage
from pkletd.supervisor.pods.types import Failure, PodRuntime, SyncResult, Waiting

log = logging.getLogger(__name__)


@dataclass
class PodEntry:
    pod: Pod
    source: PodSource
    first_seen: float = field(default_factory=time.time)
    runtime: PodRuntime | None = None
    waiting: Mapping[str, Waiting] = field(default_factory=dict)
    failure: Failure | None = None  # why it failed as a whole (rejected, DeadlineExceeded)
    kill_grace_s: int | None = None  # a failed pod's containers stop within this
    killed: bool = False  # ... and a sync has stopped them
    api: dict[str, Any] | None = None
    lifecycle: PodLifecycle = field(init=False)

    def __post_init__(self) -> None:
        self.lifecycle = PodLifecycle(self.pod.uid, self.pod.full_name)


@dataclass(frozen=True, slots=True)
class FinalDelete:
    source: PodSource
    ref: dict[str, Any]  # uid, namespace, name: what the status manager deletes


@dataclass(frozen=True, slots=True)
class SourceChange:
    sync: tuple[Pod, ...]
    terminate: tuple[Pod, ...]


class Pods:
    def __init__(
        self, host_ip: str, expected_sources: Iterable[PodSource], probes: ProbeResults
    ) -> None:
        self.entries: dict[PodUID, PodEntry] = {}
        self._orphans: dict[PodUID, PodLifecycle] = {}  # terminating, with no source's pod
        self._final: dict[PodUID, FinalDelete] = {}  # stopped, deleted in the API, listed
        self._final_done: set[PodUID] = set()  # ... and the status manager deleted it
        self.host_ip = host_ip
        self._probes = probes
        self._unseen_sources = set(expected_sources)
        self._owner_of: dict[str, PodUID] = {}  # runtime object id -> pod uid
        self._invalid_said: dict[str, dict[str, str]] = {}  # source -> pod -> reason logged

    @property
    def sources_ready(self) -> bool:
        """Every source has reported once: pods in the runtime that none wants are orphans."""
        return not self._unseen_sources

    def set_source(self, source: PodSource, raw_pods: list[dict[str, Any]]) -> SourceChange:
        """A source's whole set. A pod it lists as deleted in the API (``deletionTimestamp``)
        is not wanted: it is terminated with the deletion's grace period, and once stopped
        waits for its final delete (``awaiting_delete``) until the source stops listing it."""
        self._unseen_sources.discard(source)
        listed = self._parse(source, raw_pods)
        wanted = {uid: pod for uid, pod in listed.items() if not pod.deleted}
        self._note_deleted(source, {uid: p for uid, p in listed.items() if p.deleted})
        sync = []
        for uid, pod in wanted.items():
            entry = self.entries.get(uid)
            if entry is None or not entry.lifecycle.wanted():
                self.entries[uid] = PodEntry(pod, source)
                log.info("pod added source=%s pod=%s uid=%s", source, pod.full_name, uid)
                sync.append(pod)
            elif entry.pod.raw != pod.raw:
                entry.pod = pod
                log.info("pod updated source=%s pod=%s uid=%s", source, pod.full_name, uid)
                sync.append(pod)
        gone = [
            e.pod
            for uid, e in self.entries.items()
            if e.source == source and uid not in wanted and e.lifecycle.wanted()
        ]
        for pod in gone:
            why = "deleted in the API" if pod.deleted else f"removed by {source}"
            self.entries[pod.uid].lifecycle.become(PodStage.TERMINATING, why)
        return SourceChange(tuple(sync), tuple(gone))

    def _parse(self, source: PodSource, raw_pods: list[dict[str, Any]]) -> dict[PodUID, Pod]:
        found = {}
        said = self._invalid_said.get(source, {})
        self._invalid_said[source] = {}
        for raw in raw_pods:
            pod: Pod | None = self._unchanged(source, raw)
            if pod is None:
                try:
                    pod = parse_pod(raw)
                except InvalidPod as exc:
                    pod = self._invalid(source, raw, exc, said)
            if pod is not None:
                found[pod.uid] = pod
        return found

    def _unchanged(self, source: PodSource, raw: Any) -> Pod | None:
        """The pod already parsed from this very ``raw`` (a source sends its whole set at
        each change: with 100 API pods created one by one, parsing each set again cost
        the parent about 5000 parses); None if it is new, changed or was invalid."""
        uid = (raw.get("metadata") or {}).get("uid") if isinstance(raw, dict) else None
        entry = self.entries.get(PodUID(uid)) if isinstance(uid, str) else None
        if entry is None or entry.source != source or entry.pod.invalid:
            return None
        return entry.pod if entry.pod.raw == raw else None

    def _invalid(
        self, source: PodSource, raw: dict[str, Any], error: InvalidPod, said: dict[str, str]
    ) -> Pod | None:
        """A pod that cannot be run: a new one is kept for admission to refuse (its status
        says why); an invalid change of a pod already known leaves the known one as it is.
        Each is logged once per reason (``said``: what the source's last set logged)."""
        refused = refused_pod(raw, error)
        key = refused.uid if refused is not None else str(error)
        self._invalid_said[source][key] = str(error)
        quiet = said.get(key) == str(error)
        if refused is None:
            if not quiet:
                log.error("dropped invalid pod from source=%s reason=%s", source, error)
            return None
        known = self.entries.get(refused.uid)
        if known is not None and not known.pod.invalid:
            if not quiet:
                log.error(
                    "ignored invalid change source=%s pod=%s reason=%s",
                    source,
                    known.pod.full_name,
                    error,
                )
            return known.pod
        if not quiet:
            log.error(
                "refusing invalid pod source=%s pod=%s reason=%s", source, refused.full_name, error
            )
        return refused

    def _note_deleted(self, source: PodSource, deleted: dict[PodUID, Pod]) -> None:
        """Bring pods deleted in the API up to date (their grace period), so they are
        terminated; one this parent never saw (it restarted) gets an entry to stop."""
        self._final = {
            uid: final
            for uid, final in self._final.items()
            if final.source != source or uid in deleted
        }
        self._final_done &= self._final.keys()
        for uid, pod in deleted.items():
            entry = self.entries.get(uid)
            if entry is None and uid not in self._final:
                self.entries[uid] = PodEntry(pod, source)
            elif entry is not None and entry.lifecycle.wanted():
                entry.pod = pod

    def awaiting_delete(self) -> list[dict[str, Any]]:
        """Stopped pods deleted in the API, whose final delete is not yet confirmed."""
        return [f.ref for uid, f in self._final.items() if uid not in self._final_done]

    def final_delete(self, uid: PodUID) -> dict[str, Any] | None:
        """The pod's uid, namespace and name if it awaits its final delete."""
        final = self._final.get(uid)
        return final.ref if final is not None and uid not in self._final_done else None

    def final_delete_done(self, uid: PodUID) -> None:
        self._final_done.add(uid)

    def get(self, uid: PodUID) -> Pod | None:
        """The pod a source wants (None once it was removed, while it terminates)."""
        entry = self.entries.get(uid)
        return entry.pod if entry is not None and entry.lifecycle.wanted() else None

    def removed(self, uid: PodUID) -> Pod | None:
        """The pod a source removed, while it terminates (None for an orphan)."""
        entry = self.entries.get(uid)
        return entry.pod if entry is not None and entry.lifecycle.terminating() else None

    def orphaned(self, uid: PodUID) -> None:
        """The loop terminates a pod no source wants, which the runtime (or a cgroup) has."""
        self._orphans[uid] = PodLifecycle(uid, uid, PodStage.TERMINATING)
        log.info("pod stage pod=%s uid=%s stage=terminating why=orphan", uid, uid)

    def terminating(self, uid: PodUID) -> bool:
        """Its termination is under way (a removed pod's, or an orphan's)."""
        entry = self.entries.get(uid)
        return uid in self._orphans or (entry is not None and entry.lifecycle.terminating())

    def forget(self, uid: PodUID) -> bool:
        """Its termination finished: drop a removed pod; True if it was dropped (False:
        a source wants it again, as a new pod). A pod deleted in the API now awaits its
        final delete."""
        orphan = self._orphans.pop(uid, None)
        if orphan is not None:
            orphan.become(PodStage.TERMINATED, "terminated")
        entry = self.entries.get(uid)
        if entry is not None and entry.lifecycle.terminating():
            entry.lifecycle.become(PodStage.TERMINATED, "terminated")
            del self.entries[uid]
            if entry.pod.deleted:
                pod = entry.pod
                ref = {"uid": uid, "namespace": pod.namespace, "name": pod.name}
                self._final[uid] = FinalDelete(entry.source, ref)
        self._owner_of = {k: v for k, v in self._owner_of.items() if v != uid}
        return uid not in self.entries

    def owner(self, object_id: str) -> PodUID | None:
        return self._owner_of.get(object_id)

    def record(self, result: SyncResult) -> dict[str, Any] | None:
        """Fold a sync result in; the new API pod if its status changed, else None."""
        for object_id in result.runtime.objects():
            self._owner_of[object_id] = result.uid
        entry = self.entries.get(result.uid)
        if entry is None:
            return None
        entry.runtime = podexits.keep_exits(entry.runtime, result.runtime)
        entry.waiting = result.waiting
        entry.killed = entry.killed or result.killed
        return self._recompute(entry)

    def final_status(self, result: SyncResult) -> dict[str, Any] | None:
        """A pod deleted in the API whose termination finished: fold in its stopped
        containers; its last API pod (terminal phase) if its status changed, else None."""
        entry = self.entries.get(result.uid)
        if entry is None or not entry.lifecycle.terminating() or not entry.pod.deleted:
            return None
        return self.record(result)

    def exited(self, uid: PodUID, event: PodLifecycleEvent) -> dict[str, Any] | None:
        """Fold in the exit a ``ContainerDied`` carries; the new API pod if its status
        changed, else None (no exit told, or a container the record does not run)."""
        entry = self.entries.get(uid)
        if entry is None or entry.runtime is None:
            return None
        runtime = podexits.exited(entry.runtime, event)
        if runtime is None:
            return None
        entry.runtime = runtime
        return self._recompute(entry)

    def objects(self, uid: PodUID) -> dict[str, str]:
        """The pod's runtime objects as the record has them (PLEG's keys and states)."""
        entry = self.entries.get(uid)
        return entry.runtime.objects() if entry is not None and entry.runtime else {}

    def refresh(self, uid: PodUID) -> dict[str, Any] | None:
        """Recompute a pod's status after a probe result; the API pod if it changed."""
        entry = self.entries.get(uid)
        return self._recompute(entry) if entry is not None and entry.runtime is not None else None

    def stage(self, uid: PodUID) -> PodStage | None:
        entry = self.entries.get(uid)
        return entry.lifecycle.stage if entry is not None else None

    def admitted(self, uid: PodUID) -> bool:
        entry = self.entries.get(uid)
        return entry is not None and entry.lifecycle.admitted()

    def admit(self, uid: PodUID) -> None:
        self.entries[uid].lifecycle.become(PodStage.ACTIVE, "admitted")

    def reject(self, uid: PodUID, reason: str, message: str) -> dict[str, Any] | None:
        """Admission refused the pod: it is Failed and never runs; its API pod."""
        entry = self.entries[uid]
        entry.lifecycle.become(PodStage.REJECTED, reason)
        entry.failure = Failure(reason, f"Pod was rejected: {message}")  # the kubelet's wording
        entry.runtime = PodRuntime(uid)
        return self._recompute(entry)

    def active(self) -> list[Pod]:
        """Admitted pods that have not finished: what admission counts against the node."""
        return [
            e.pod
            for e in self.entries.values()
            if e.lifecycle.admitted()
            and e.lifecycle.wanted()
            and (e.api or {}).get("status", {}).get("phase") not in TERMINAL_PHASES
        ]

    def deadline_left(self, uid: PodUID) -> float | None:
        """Seconds until the pod's activeDeadlineSeconds run out; None without one."""
        entry = self.entries.get(uid)
        if entry is None or entry.pod.active_deadline_s is None:
            return None
        return entry.first_seen + entry.pod.active_deadline_s - time.time()

    def fail(self, uid: PodUID, failure: Failure, grace_s: int) -> bool:
        """Mark an active pod failed as a whole, its containers to stop within ``grace_s``;
        True the first time."""
        entry = self.entries.get(uid)
        if entry is None or entry.lifecycle.stage is not PodStage.ACTIVE:
            return False
        entry.lifecycle.become(PodStage.FAILED, failure.reason)
        entry.failure = failure
        entry.kill_grace_s = grace_s
        return True

    def kill_grace(self, uid: PodUID) -> int | None:
        """The grace period a failed pod's containers stop within; None if it did not fail."""
        entry = self.entries.get(uid)
        return entry.kill_grace_s if entry is not None else None

    def stopped(self, uid: PodUID) -> bool:
        """A sync stopped the failed pod's containers since it failed, or it is gone."""
        entry = self.entries.get(uid)
        return entry is None or entry.killed

    def has_run(self, uid: PodUID) -> bool:
        """The pod has a sandbox already (its syncs are follow-ups, not first starts)."""
        entry = self.entries.get(uid)
        return entry is not None and entry.runtime is not None and bool(entry.runtime.sandboxes)

    def already_seen(self, uid: PodUID, event: PodLifecycleEvent) -> bool:
        """The parent's own calls already showed this state (PLEG relisted in between)."""
        entry = self.entries.get(uid)
        if entry is None or entry.runtime is None:
            return False
        key = event.object_id
        if event.event is LifecycleEventType.SANDBOX_CHANGED:
            key = SANDBOX_PREFIX + key
        return entry.runtime.objects().get(key, "") == event.state

    def waiting(self, uid: PodUID) -> bool:
        """A container of the pod waits to start, or the pod has not been synced yet."""
        entry = self.entries.get(uid)
        return entry is not None and (entry.runtime is None or bool(entry.waiting))

    def running_id(self, uid: PodUID, container: str) -> str:
        """The id of the container instance running under this name, else ""."""
        entry = self.entries.get(uid)
        if entry is None or entry.runtime is None:
            return ""
        latest = entry.runtime.latest(container)
        return latest.id if latest is not None and latest.state is ContainerState.RUNNING else ""

    def _recompute(self, entry: PodEntry) -> dict[str, Any] | None:
        assert entry.runtime is not None
        previous = entry.api["status"] if entry.api is not None else None
        status = podstatus.pod_status(
            entry.pod,
            entry.runtime,
            entry.waiting,
            self.host_ip,
            entry.first_seen,
            previous,
            self._probes,
            entry.failure,
            terminal=entry.pod.deleted and entry.lifecycle.terminating(),
        )
        if (
            previous == status
            and entry.api is not None
            and entry.api["metadata"] == entry.pod.raw["metadata"]
        ):
            return None
        entry.api = {**entry.pod.raw, "status": status}
        return entry.api

    def api_pods(self) -> list[dict[str, Any]]:
        return [e.api for e in self.entries.values() if e.api is not None]

    def runtime_objects(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for entry in self.entries.values():
            if entry.runtime is not None:
                found.update(entry.runtime.objects())
        return found

    def summary(self) -> list[dict[str, Any]]:
        """Pods as ``pkletd status`` shows them."""
        out = []
        for uid, entry in sorted(self.entries.items(), key=lambda kv: kv[1].pod.full_name):
            status = (entry.api or {}).get("status", {})
            out.append(
                {
                    "namespace": entry.pod.namespace,
                    "name": entry.pod.name,
                    "uid": uid,
                    "phase": status.get("phase", PodPhase.PENDING),
                    "containers": [
                        self._container_summary(uid, c) for c in status.get("containerStatuses", [])
                    ]
                    + [
                        {**self._container_summary(uid, c), "ephemeral": True}
                        for c in status.get("ephemeralContainerStatuses", [])
                    ],
                }
            )
        return out

    def _container_summary(self, uid: PodUID, status: dict[str, Any]) -> dict[str, Any]:
        state_name, detail = next(iter(status["state"].items()))
        container_id = status.get("containerID", "").split("://")[-1]
        return {
            "name": status["name"],
            "state": detail.get("reason", state_name) if state_name == "waiting" else state_name,
            "ready": status["ready"],
            "restart_count": status["restartCount"],
            "container_id": container_id,
            "probes": self._probes.of_container(uid, status["name"], container_id),
        }
