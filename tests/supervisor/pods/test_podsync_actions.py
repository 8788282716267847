"""compute_actions: what one pod sync kills and starts, from the pod and what the runtime has."""

from __future__ import annotations

import pytest
from pkletd.ipc.runtime.cri import ContainerState, SandboxInfo, SandboxState
from pkletd.supervisor.pods.podactions import Actions, compute_actions, pod_done, should_restart

from tests.supervisor.pods.unit_helpers import container, make_pod, runtime, sandbox

RUNNING, EXITED, CREATED = ContainerState.RUNNING, ContainerState.EXITED, ContainerState.CREATED


def started(actions: Actions) -> list[str]:
    return [c.name for c in actions.start]


def killed(actions: Actions) -> list[str]:
    return [c.id for c in actions.kill]


def test_no_sandbox_creates_attempt_0_and_starts_every_container() -> None:
    pod = make_pod("app", "sidecar")
    actions = compute_actions(pod, runtime())
    assert actions == Actions(create_sandbox=True, sandbox_attempt=0, start=pod.containers)


def test_everything_running_as_specified_needs_nothing() -> None:
    pod = make_pod("app", "sidecar")
    state = runtime(sandbox(), container(pod, "app"), container(pod, "sidecar"))
    assert compute_actions(pod, state) == Actions()


def test_changed_spec_replaces_the_container() -> None:
    pod = make_pod("app")
    actions = compute_actions(pod, runtime(sandbox(), container(pod, spec_hash="0ld0ld00")))
    assert (killed(actions), started(actions)) == (["app-0"], ["app"])
    assert not actions.kill_pod and not actions.create_sandbox


def test_container_no_longer_in_the_spec_is_killed() -> None:
    old = make_pod("app", "gone")
    pod = make_pod("app")
    actions = compute_actions(pod, runtime(sandbox(), container(pod), container(old, "gone")))
    assert (killed(actions), started(actions)) == (["gone-0"], [])


def test_created_but_never_started_container_is_started() -> None:
    pod = make_pod("app", restartPolicy="Never")
    actions = compute_actions(pod, runtime(sandbox(), container(pod, state=CREATED)))
    assert started(actions) == ["app"]


@pytest.mark.parametrize(
    ("policy", "exit_code", "restarted"),
    [
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 1, True),
        ("OnFailure", 0, False),
        ("Never", 1, False),
        ("Never", 0, False),
    ],
)
def test_exited_container_under_restart_policy(
    policy: str, exit_code: int, restarted: bool
) -> None:
    pod = make_pod("app", restartPolicy=policy)
    dead = container(pod, state=EXITED, exit_code=exit_code)
    actions = compute_actions(pod, runtime(sandbox(), dead))

    assert should_restart(pod, dead) is restarted
    assert started(actions) == (["app"] if restarted else [])
    assert pod_done(pod, runtime(sandbox(), dead)) is not restarted


def test_onfailure_pod_is_not_done_while_one_container_still_runs() -> None:
    pod = make_pod("app", "sidecar", restartPolicy="OnFailure")
    state = runtime(sandbox(), container(pod, state=EXITED), container(pod, "sidecar"))
    assert not pod_done(pod, state)
    assert compute_actions(pod, state) == Actions()


@pytest.mark.parametrize(
    "box",
    [sandbox(SandboxState.NOTREADY, attempt=2), sandbox(ip="", attempt=2)],
    ids=["notready", "pod-network-without-ip"],
)
def test_unusable_sandbox_is_replaced_with_the_next_attempt(box: SandboxInfo) -> None:
    pod = make_pod("app")
    actions = compute_actions(pod, runtime(box, container(pod)))
    assert actions == Actions(
        kill_pod=True, create_sandbox=True, sandbox_attempt=3, start=pod.containers
    )


def test_host_network_sandbox_needs_no_ip() -> None:
    pod = make_pod("app", hostNetwork=True)
    assert compute_actions(pod, runtime(sandbox(ip=""), container(pod))) == Actions()


def test_newest_sandbox_decides() -> None:
    pod = make_pod("app")
    state = runtime(sandbox(SandboxState.NOTREADY, attempt=0), sandbox(attempt=1), container(pod))
    assert compute_actions(pod, state) == Actions()


def test_done_pod_with_ready_sandbox_is_only_killed() -> None:
    pod = make_pod("app", restartPolicy="Never")
    state = runtime(sandbox(), container(pod, state=EXITED, exit_code=1))
    assert compute_actions(pod, state) == Actions(kill_pod=True)


def test_done_pod_already_torn_down_needs_nothing() -> None:
    pod = make_pod("app", restartPolicy="Never")
    state = runtime(sandbox(SandboxState.NOTREADY), container(pod, state=EXITED))
    assert compute_actions(pod, state) == Actions()


def test_lost_sandbox_of_a_never_pod_is_not_recreated() -> None:
    pod = make_pod("app", restartPolicy="Never")
    state = runtime(sandbox(SandboxState.NOTREADY), container(pod))
    assert compute_actions(pod, state) == Actions(kill_pod=True)


def test_lost_sandbox_of_an_onfailure_pod_reruns_only_what_did_not_succeed() -> None:
    pod = make_pod("ok", "bad", restartPolicy="OnFailure")
    state = runtime(
        sandbox(SandboxState.NOTREADY),
        container(pod, "ok", state=EXITED, exit_code=0),
        container(pod, "bad", state=EXITED, exit_code=1),
    )
    actions = compute_actions(pod, state)
    assert actions.create_sandbox and started(actions) == ["bad"]
