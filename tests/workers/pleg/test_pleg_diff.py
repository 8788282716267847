"""PLEG's relist diff: which lifecycle events turn the last runtime view into the new one."""

from __future__ import annotations

import pytest
from pkletd.ipc.bus.messages import SANDBOX_PREFIX, PodLifecycleEvent
from pkletd.workers.pleg.diff import DIED, REMOVED, SANDBOX_CHANGED, STARTED, diff

OWNERS = {"c1": "uid-1", "c2": "uid-2", SANDBOX_PREFIX + "s1": "uid-1"}


def events(old: dict[str, str], new: dict[str, str]) -> list[tuple[str, str, str]]:
    return [(e.pod_uid, e.event, e.object_id) for e in diff(old, new, OWNERS)]


@pytest.mark.parametrize(
    ("before", "after", "event"),
    [
        (None, "running", STARTED),
        ("created", "running", STARTED),
        ("exited", "running", STARTED),
        ("running", "exited", DIED),
        ("created", "exited", DIED),
        (None, "exited", DIED),
        ("running", "unknown", DIED),
        ("exited", None, REMOVED),
    ],
)
def test_container_change(before: str | None, after: str | None, event: str) -> None:
    old = {} if before is None else {"c1": before}
    new = {} if after is None else {"c1": after}
    assert events(old, new) == [("uid-1", event, "c1")]


def test_running_container_gone_between_relists_died_then_removed() -> None:
    assert events({"c1": "running"}, {}) == [("uid-1", DIED, "c1"), ("uid-1", REMOVED, "c1")]


def test_created_container_is_not_an_event_until_it_runs() -> None:
    assert events({}, {"c1": "created"}) == []


@pytest.mark.parametrize(
    ("before", "after"), [(None, "ready"), ("ready", "notready"), ("ready", None)]
)
def test_sandbox_change(before: str | None, after: str | None) -> None:
    key = SANDBOX_PREFIX + "s1"
    old = {} if before is None else {key: before}
    new = {} if after is None else {key: after}
    assert events(old, new) == [("uid-1", SANDBOX_CHANGED, "s1")]


def test_unchanged_runtime_gives_no_events() -> None:
    view = {"c1": "running", "c2": "exited", SANDBOX_PREFIX + "s1": "ready"}
    assert diff(view, dict(view), OWNERS) == []


def test_several_changes_at_once_each_reported_for_its_pod() -> None:
    old = {"c1": "running", "c2": "running"}
    new = {"c1": "exited"}
    assert diff(old, new, OWNERS) == [
        PodLifecycleEvent("uid-1", DIED, "c1", "exited"),
        PodLifecycleEvent("uid-2", DIED, "c2", "exited"),
        PodLifecycleEvent("uid-2", REMOVED, "c2"),
    ]


def test_unknown_owner_is_reported_with_an_empty_uid() -> None:
    assert events({}, {"c9": "running"}) == [("", STARTED, "c9")]


def test_events_carry_the_state_pleg_saw() -> None:
    (started,) = diff({}, {"c1": "running"}, OWNERS)
    (removed,) = diff({"c1": "exited"}, {}, OWNERS)
    assert (started.state, removed.state) == ("running", "")
