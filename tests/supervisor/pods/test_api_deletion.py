"""Pods deleted in the API: terminated with the deletion's grace period, then kept as
awaiting their final delete until the status manager confirms it and the API drops them."""

from __future__ import annotations

from typing import Any

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.stage import PodStage

from tests.supervisor.pods.unit_helpers import UID, pod_dict


def api_pod(deleted: bool = False, grace: int | None = None, **spec: Any) -> dict[str, Any]:
    pod = pod_dict("app", terminationGracePeriodSeconds=30, **spec)
    if deleted:
        pod["metadata"]["deletionTimestamp"] = "2026-11-24T10:00:00Z"
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
    return pod


def book() -> Pods:
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    pods.set_source("api", [api_pod()])
    pods.admit(UID)
    return pods


def test_a_deleted_pod_is_terminated_with_the_deletion_grace() -> None:
    pods = book()
    change = pods.set_source("api", [api_pod(deleted=True, grace=7)])
    assert [p.grace_period_s for p in change.terminate] == [7]
    assert pods.stage(UID) is PodStage.TERMINATING
    again = pods.set_source("api", [api_pod(deleted=True, grace=7)])
    assert again.terminate == () and again.sync == ()  # once


def test_once_stopped_it_awaits_its_final_delete_until_confirmed() -> None:
    pods = book()
    pods.set_source("api", [api_pod(deleted=True, grace=7)])
    assert pods.forget(UID)
    ref = {"uid": UID, "namespace": "default", "name": "web"}
    assert pods.final_delete(UID) == ref and pods.awaiting_delete() == [ref]
    still_listed = pods.set_source("api", [api_pod(deleted=True, grace=7)])
    assert still_listed.sync == () and still_listed.terminate == ()  # not run again
    pods.final_delete_done(UID)
    assert pods.awaiting_delete() == [] and pods.final_delete(UID) is None
    pods.set_source("api", [])  # the API dropped it
    assert pods.stage(UID) is None


def test_a_deleted_pod_first_seen_after_a_restart_is_still_stopped() -> None:
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    change = pods.set_source("api", [api_pod(deleted=True, grace=3)])
    assert [p.uid for p in change.terminate] == [UID]


def test_a_static_source_does_not_clear_api_deletions() -> None:
    pods = book()
    pods.set_source("api", [api_pod(deleted=True, grace=0)])
    pods.forget(UID)
    pods.set_source("file", [])
    assert pods.final_delete(PodUID(UID)) is not None


def test_a_pod_the_api_says_ended_is_not_started_again() -> None:
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    ended = {**api_pod(), "status": {"phase": "Succeeded"}}
    change = pods.set_source("api", [ended])
    assert [p.finished for p in change.sync] == [True]
