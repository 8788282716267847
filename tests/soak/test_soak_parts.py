"""The soak's own pure parts: the forms, the mutations, and the comparisons that decide
whether a restart was caused or a status update lost."""

from __future__ import annotations

import json
from random import Random

from tests.soak.mutate import dotted, mutant, places
from tests.soak.observe import Container, Fingerprint, _compare, _newest
from tests.soak.plan import FULL, SHORT
from tests.soak.podmix import PodSet, fuzz_bases


def test_the_short_form_is_a_tenth_on_twenty_pods() -> None:
    assert (SHORT.worker_kills, SHORT.parent_kills, SHORT.containerd_restarts) == (20, 2, 1)
    assert (SHORT.bus_messages, SHORT.http_requests, SHORT.manifests) == (1000, 1000, 100)
    assert (SHORT.pods, FULL.pods, SHORT.disk_fulls) == (20, 90, 1)


def test_the_mix_has_every_kind_and_two_restarting_on_purpose() -> None:
    pods = PodSet.of(20)
    kinds = {name.split("-")[1] for name in [*pods.static, *pods.api]}
    assert kinds == {"plain", "exec", "http", "tcp", "init", "api", "crash", "sick"}
    assert pods.on_purpose == {"soak-crash-18-testnode", "soak-sick-19-testnode"}
    assert len(pods.stable()) == 18


def test_mutants_are_json_and_differ_from_their_base() -> None:
    rng = Random(7)
    for i in range(200):
        base = rng.choice(fuzz_bases())
        pod, done = mutant(base, f"fuzz-{i}", rng)
        assert 1 <= len(done) <= 3
        assert json.loads(json.dumps(pod)) == pod
        assert pod != {**base, "metadata": {**base["metadata"], "name": f"fuzz-{i}"}}
    assert dotted(("spec", "containers", 0, "image")) == "spec.containers[0].image"
    assert ("spec", "containers", 0, "image") in places(fuzz_bases()[0])


def c(cid: str, attempt: int, running: bool = True, name: str = "c0") -> Container:
    return Container(cid, name, attempt, running)


def test_a_new_container_or_a_stopped_one_is_a_restart() -> None:
    before = Fingerprint({"u": [c("a", 0)]}, {"u": {"s1"}})
    assert Fingerprint({"u": [c("a", 0)]}, {"u": {"s1"}}).restarts_since(before) == []
    after = Fingerprint({"u": [c("a", 0, running=False), c("b", 1)]}, {"u": {"s1", "s2"}})
    assert after.restarts_since(before) == [
        "pod u: new container c0 attempt 1",
        "pod u: c0 stopped",
        "pod u: new sandbox s2",
    ]


def status(cid: str, restarts: int, state: str = "running") -> dict[str, object]:
    container = {"name": "c0", "container_id": cid, "state": state, "ready": True}
    return {
        "name": "p",
        "phase": "Running",
        "containers": [{**container, "restart_count": restarts}],
    }


def api(cid: str, restarts: int) -> dict[str, object]:
    state = {"running": {}}
    statuses = [{"name": "c0", "containerID": f"containerd://{cid}", "state": state,
                 "restartCount": restarts, "ready": True}]  # fmt: skip
    return {"status": {"phase": "Running", "containerStatuses": statuses}}


def test_every_view_must_agree_with_the_runtime() -> None:
    newest = _newest([c("a", 0, running=False), c("b", 1)])
    assert _compare(status("b", 1), newest, {"the API server": {"p": api("b", 1)}}) == []
    stale = _compare(status("b", 1), newest, {"the API server": {"p": api("a", 0)}})
    assert len(stale) == 1 and stale[0].startswith("p: the API server says Running")
    behind = _compare(status("a", 0), newest, {})
    assert behind == ["p/c0: pkletd ('a', True, 0), runtime ('b', True, 1)"]
    assert _compare(status("b", 1), newest, {"/pods": {}}) == ["p: missing from /pods"]
