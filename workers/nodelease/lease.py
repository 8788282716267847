"""The node lease, renewed as the kubelet's lease controller renews it.

``coordination.k8s.io/v1`` Lease ``kube-node-lease/<node>``: ``holderIdentity`` the
node's name, ``leaseDurationSeconds`` from the configuration, ``renewTime`` now, and an
owner reference to the Node once its uid is known (a Lease is not created before
that, so it is garbage-collected with its Node). Every ``interval`` (a quarter of
the duration, plus up to 4% jitter, counted from the end of the last renewal):

- with a lease in hand, PUT it with a new ``renewTime`` (no GET), up to 5 times;
- otherwise, or when that failed, GET it (404: create it), retrying with back-off from
  200 ms doubling to 7 s until that succeeds, then PUT it;
- a 409 (someone else wrote it) GETs it again and retries.

It runs on a thread of its own with its own API client, so a slow node-status write
never delays it, and reports each renewal (or failure) through ``report``.
"""

from __future__ import annotations

import copy
import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from pkletd.ipc.apiclient.jsonapi import CONFLICT, NOT_FOUND, ApiCallFailed
from pkletd.ipc.clock import Clock
from pkletd.workers.nodelease.api import LEASE_NAMESPACE, NodeApi
from pkletd.workers.nodelease.outcome import Outcome, Source
from pkletd.workers.nodelease.timing import Backoff, micro_time, parse_time

log = logging.getLogger(__name__)

MAX_UPDATE_RETRIES = 5
ENSURE_FIRST_WAIT_S = 0.2
ENSURE_MAX_WAIT_S = 7.0
JITTER = 0.04

Obj = dict[str, Any]


class LeaseKeeper:
    def __init__(
        self,
        api: NodeApi,
        node_name: str,
        duration_s: int,
        interval_s: float,
        clock: Clock,
        report: Callable[[Outcome], None],
        jitter: float = JITTER,
    ) -> None:
        self._api = api
        self._name = node_name
        self._duration = duration_s
        self._interval = interval_s
        self._clock = clock
        self._report = report
        self._jitter = jitter
        self._latest: Obj | None = None  # the lease as last written or read
        self._lock = threading.Lock()
        self._node_uid = ""
        self._waiting = False  # for the Node to exist (logged once)

    def set_node_uid(self, uid: str) -> None:
        """The Node's uid, learned elsewhere (saves a GET for the owner reference)."""
        with self._lock:
            self._node_uid = uid

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.sync(stop)
            wait = self._interval * (1 + self._jitter * random.random())
            if self._clock.wait(stop, wait):
                return

    def sync(self, stop: threading.Event) -> None:
        """One renewal, as the kubelet's ``controller.sync``."""
        if self._latest is not None:
            if self._retry_update(self._latest, stop):
                return
            log.info("lease update failed; reading it again node=%s", self._name)
        lease, created = self._backoff_ensure(stop)
        self._latest = lease
        if lease is not None and not created:
            self._retry_update(lease, stop)

    # --- steps --------------------------------------------------------------------------------

    def _backoff_ensure(self, stop: threading.Event) -> tuple[Obj | None, bool]:
        backoff = Backoff(ENSURE_FIRST_WAIT_S, ENSURE_MAX_WAIT_S)
        while not stop.is_set():
            try:
                return self._ensure()
            except ApiCallFailed as exc:
                wait = backoff.next()
                log.error(
                    "lease not ensured node=%s retry_in=%.1fs error=%s", self._name, wait, exc
                )
                self._report(Outcome(Source.LEASE, error=str(exc)))
                if self._clock.wait(stop, wait):
                    break
        return None, False

    def _ensure(self) -> tuple[Obj | None, bool]:
        """The lease, created if there is none (and the Node's uid is known)."""
        try:
            return self._api.get_lease(self._name), False
        except ApiCallFailed as exc:
            if exc.status != NOT_FOUND:
                raise
        lease = self._new_lease()
        if not self._owned(lease):
            if not self._waiting:
                log.info("lease waits for its node node=%s", self._name)
                self._waiting = True
            return None, False
        self._waiting = False
        created = self._api.create_lease(lease)
        self._renewed(created, lease)
        log.info("lease created node=%s duration=%ds", self._name, self._duration)
        return created, True

    def _retry_update(self, base: Obj, stop: threading.Event) -> bool:
        for _ in range(MAX_UPDATE_RETRIES):
            lease = copy.deepcopy(base)
            lease.setdefault("spec", {})["renewTime"] = micro_time(self._clock.time())
            self._owned(lease)  # a failure here does not block the renewal
            try:
                self._latest = self._api.update_lease(lease)
            except ApiCallFailed as exc:
                log.error("lease renewal failed node=%s error=%s", self._name, exc)
                self._report(Outcome(Source.LEASE, error=str(exc)))
                if exc.status == CONFLICT:
                    fresh, _ = self._backoff_ensure(stop)
                    if fresh is None:
                        return False
                    base = fresh
                continue
            self._renewed(self._latest, lease)
            return True
        return False

    def _renewed(self, written: Obj, sent: Obj) -> None:
        renew = (written.get("spec") or {}).get("renewTime") or sent["spec"]["renewTime"]
        self._report(Outcome(Source.LEASE, written_at=_seconds(renew, self._clock.time())))

    def _new_lease(self) -> Obj:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self._name, "namespace": LEASE_NAMESPACE},
            "spec": {
                "holderIdentity": self._name,
                "leaseDurationSeconds": self._duration,
                "renewTime": micro_time(self._clock.time()),
            },
        }

    def _owned(self, lease: Obj) -> bool:
        """Give ``lease`` its owner reference to the Node if it has none; False if the
        Node's uid cannot be had."""
        meta = lease.setdefault("metadata", {})
        if meta.get("ownerReferences"):
            return True
        uid = self._uid()
        if not uid:
            return False
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": self._name, "uid": uid}
        ]
        return True

    def _uid(self) -> str:
        with self._lock:
            if self._node_uid:
                return self._node_uid
        try:
            node = self._api.get_node(self._name)
        except ApiCallFailed as exc:
            log.debug("no owner for the lease yet node=%s error=%s", self._name, exc)
            return ""
        uid = str((node.get("metadata") or {}).get("uid") or "")
        self.set_node_uid(uid)
        return uid


def _seconds(micro: str, default: float) -> float:
    return parse_time(micro) or default
