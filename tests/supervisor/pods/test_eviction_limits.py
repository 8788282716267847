"""The parent evicting pods over their local storage limits (``EvictionNeeded.limits``):
each one, 1 s to stop, Failed with reason ``Evicted`` and the worker's message, a warning
event, no ``DisruptionTarget``; a critical pod never."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pkletd.ipc.bus.messages import EvictionNeeded, LimitExceeded, PodStatusUpdated
from pkletd.supervisor.pods import eviction

from tests.supervisor.pods.test_eviction import pod
from tests.supervisor.pods.test_syncloop_unit import loop_with_running_pod
from tests.supervisor.pods.unit_helpers import UID

EMPTY_DIR = 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '
CONTAINER = 'Container c exceeded its local ephemeral storage limit "2Mi". '


def exceeded(uid: str, message: str = EMPTY_DIR) -> LimitExceeded:
    return LimitExceeded(uid=uid, signal="emptydirfs.limit", message=message)


def test_each_pod_over_a_limit_is_evicted_unless_critical() -> None:
    pods = [pod("full"), pod("system", priority=2000000000), pod("static", source="file")]
    over = [exceeded("full"), exceeded("system"), exceeded("static"), exceeded("gone")]
    evictions, critical = eviction.over_limits(pods, over)
    assert evictions == [eviction.Eviction(pods[0], 1, EMPTY_DIR, disruption=False)]
    assert [p.name for p in critical] == ["system", "static"]


def test_the_loop_fails_the_pod_without_a_disruption_condition(tmp_path: Path) -> None:
    loop, workers, _ = loop_with_running_pod(tmp_path)
    published: list[Any] = []
    loop._publish = published.append
    loop.evict(EvictionNeeded.over_limits([exceeded(UID, CONTAINER)]), max_pod_grace_s=30)
    assert workers.updates == [UID]  # a sync stops its containers
    assert loop._pods.kill_grace(UID) == 1
    (update,) = published
    assert isinstance(update, PodStatusUpdated)
    status = update.pod["status"]
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed",
        "Evicted",
        CONTAINER,
    )
    assert not [c for c in status.get("conditions") or [] if c["type"] == "DisruptionTarget"]
    (event,) = [e for e in loop._events.recent() if e["reason"] == "Evicted"]
    assert event["type"] == "Warning" and event["message"] == CONTAINER
    # a pod no longer active is not evicted twice
    loop.evict(EvictionNeeded.over_limits([exceeded(UID)]), max_pod_grace_s=30)
    assert workers.updates == [UID]
