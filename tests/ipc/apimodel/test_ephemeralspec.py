"""spec.ephemeralContainers as parse_pod reads it: the API's allow list, unique names, a
target that is not checked against the spec, and static pods that may not have any."""

from __future__ import annotations

from typing import Any

import pytest
from pkletd.ipc.apimodel.manifests import ManifestError, static_pod
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod


def pod_with(*ephemeral: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "uid": "u1"},
        "spec": {
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "app", "image": "nginx:1.25"}],
            "ephemeralContainers": list(ephemeral),
        },
    }


def debugger(**fields: Any) -> dict[str, Any]:
    return {"name": "debugger", "image": "busybox:1.36", **fields}


def test_an_ephemeral_container_is_parsed_with_its_target() -> None:
    pod = parse_pod(
        pod_with(
            debugger(
                command=["sh"],
                stdin=True,
                tty=True,
                targetContainerName="app",
                terminationMessagePolicy="File",
                resources={},
            )
        )
    )
    (found,) = pod.ephemeral_containers
    assert (found.name, found.image, found.command) == ("debugger", "busybox:1.36", ("sh",))
    assert found.stdin and found.tty and found.target_container_name == "app"
    assert [c.name for c in pod.containers] == ["app"]  # not one of the regular containers
    assert parse_pod(pod_with()).ephemeral_containers == ()


def test_a_target_the_spec_lacks_is_not_a_reason_to_drop_the_pod() -> None:
    pod = parse_pod(pod_with(debugger(targetContainerName="nope")))
    assert pod.ephemeral_containers[0].target_container_name == "nope"


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"ports": [{"containerPort": 80}]}, "ports"),
        ({"resources": {"limits": {"cpu": "1"}}}, "resources"),
        ({"readinessProbe": {"exec": {"command": ["true"]}}}, "readinessProbe"),
        ({"lifecycle": {"preStop": {"exec": {"command": ["true"]}}}}, "lifecycle"),
        ({"restartPolicy": "Always"}, "restartPolicy"),
    ],
)
def test_fields_the_api_forbids_are_refused(fields: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidPod) as caught:
        parse_pod(pod_with(debugger(**fields)))
    assert str(caught.value) == (
        f"spec.ephemeralContainers[0].{where}: cannot be set for an Ephemeral Container"
    )


def test_a_sub_path_is_refused() -> None:
    raw = pod_with(debugger(volumeMounts=[{"name": "data", "mountPath": "/d", "subPath": "x"}]))
    raw["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    with pytest.raises(InvalidPod, match=r"volumeMounts\[0\]\.subPath: cannot be set"):
        parse_pod(raw)


@pytest.mark.parametrize("taken", ["app", "setup"])
def test_a_name_another_container_has_is_refused(taken: str) -> None:
    with pytest.raises(InvalidPod) as caught:
        parse_pod(pod_with(debugger(name=taken)))
    assert str(caught.value) == f"spec.ephemeralContainers[0].name: duplicate value {taken!r}"


def test_a_mount_names_a_volume_of_the_pod() -> None:
    with pytest.raises(InvalidPod, match=r"spec\.ephemeralContainers\[0\]\.volumeMounts\[0\]"):
        parse_pod(pod_with(debugger(volumeMounts=[{"name": "nope", "mountPath": "/d"}])))


def test_a_static_pod_may_not_have_ephemeral_containers() -> None:
    with pytest.raises(ManifestError) as caught:
        static_pod(pod_with(debugger()), "file", "host:n1file:/etc/x.yaml", "n1")
    assert str(caught.value) == (
        "spec.ephemeralContainers: Forbidden: cannot be set on create "
        "(static pods do not support ephemeral containers)"
    )
