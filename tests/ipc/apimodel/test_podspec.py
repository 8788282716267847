"""parse_pod: a valid pod's typed view, and errors that name the offending field path."""

from __future__ import annotations

from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, Port, default_pull_policy, parse_pod


def manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "uid": "u1", "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.25",
                    "command": ["nginx"],
                    "args": ["-g", "daemon off;"],
                    "env": [{"name": "MODE", "value": "prod"}],
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                }
            ],
            **spec,
        },
    }


def with_container(**fields: Any) -> dict[str, Any]:
    pod = manifest()
    pod["spec"]["containers"][0].update(fields)
    return pod


def test_valid_pod() -> None:
    pod = parse_pod(manifest(restartPolicy="OnFailure", terminationGracePeriodSeconds=5))
    assert (pod.uid, pod.name, pod.namespace, pod.full_name) == (
        "u1",
        "web",
        "default",
        "default/web",
    )
    assert (pod.restart_policy, pod.host_network, pod.grace_period_s) == ("OnFailure", False, 5)
    assert pod.labels == {"app": "web"}
    (c,) = pod.containers
    assert (c.name, c.image, c.image_pull_policy) == ("app", "nginx:1.25", "IfNotPresent")
    assert (c.command, c.args) == (("nginx",), ("-g", "daemon off;"))
    assert [(e.name, e.value) for e in c.env] == [("MODE", "prod")]
    assert c.ports == (Port(80, 8080, "TCP"),)


def test_defaults() -> None:
    pod = parse_pod(
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    assert (pod.restart_policy, pod.grace_period_s, pod.namespace) == ("Always", 30, "default")
    assert pod.containers[0].image_pull_policy == "Always"


def two_containers(second: str) -> dict[str, Any]:
    pod = manifest()
    pod["spec"]["containers"].append({"name": second, "image": "busybox"})
    return pod


BAD = [
    (manifest(containers=[]), "spec.containers: required value"),
    ({"metadata": {"name": "web"}, "spec": {}}, "spec.containers: required value"),
    (with_container(image=""), "spec.containers[0].image: required value"),
    (two_containers("app"), "spec.containers[1].name: duplicate value 'app'"),
    (two_containers("Bad_Name"), "spec.containers[1].name: invalid value"),
    (manifest(restartPolicy="Sometimes"), "spec.restartPolicy: unsupported value 'Sometimes'"),
    ({**manifest(), "metadata": {"name": "Web!"}}, "metadata.name: invalid value 'Web!'"),
    ({**manifest(), "metadata": {}}, "metadata.name: required value"),
    (manifest(hostNetwork="yes"), "spec.hostNetwork: must be true or false"),
    (manifest(terminationGracePeriodSeconds=-1), "spec.terminationGracePeriodSeconds"),
    (with_container(ports=[{"containerPort": 0}]), "spec.containers[0].ports[0].containerPort"),
    (
        with_container(ports=[{"containerPort": 80, "hostPort": 70000}]),
        "spec.containers[0].ports[0].hostPort",
    ),
    (
        with_container(ports=[{"containerPort": 80, "protocol": "HTTP"}]),
        "spec.containers[0].ports[0].protocol",
    ),
    (with_container(command="nginx"), "spec.containers[0].command: must be a list"),
    (with_container(env=[{"name": "1X"}]), "spec.containers[0].env[0].name"),
    (with_container(imagePullPolicy="Sometimes"), "spec.containers[0].imagePullPolicy"),
    ({**manifest(), "kind": "Deployment"}, "kind: must be Pod"),
    (manifest(imagePullSecrets="regcred"), "spec.imagePullSecrets: must be a list"),
    (manifest(imagePullSecrets=[{"name": 7}]), "spec.imagePullSecrets[0].name: must be a string"),
    (["not", "a", "pod"], "pod: must be a mapping"),
]


@pytest.mark.parametrize(("raw", "path"), [pytest.param(*case, id=case[1]) for case in BAD])
def test_errors_start_with_the_field_path(raw: Any, path: str) -> None:
    with pytest.raises(InvalidPod) as caught:
        parse_pod(raw)
    assert str(caught.value).startswith(path)


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("registry:5000/nginx", "Always"),
        ("registry:5000/nginx:1.25", "IfNotPresent"),
        ("nginx@sha256:abcd", "IfNotPresent"),
    ],
)
def test_default_pull_policy(image: str, policy: str) -> None:
    assert default_pull_policy(image) == policy


def container_hash(pod: dict[str, Any]) -> str:
    return parse_pod(pod).containers[0].hash


def test_image_pull_secrets_in_order_without_unnamed_entries() -> None:
    secrets = [{"name": "b"}, {}, {"name": ""}, {"name": "a"}]
    assert parse_pod(manifest(imagePullSecrets=secrets)).image_pull_secrets == ("b", "a")
    assert parse_pod(manifest()).image_pull_secrets == ()


def test_container_hash_is_stable_and_follows_the_spec() -> None:
    assert container_hash(manifest()) == container_hash(manifest())
    assert container_hash(manifest()) != container_hash(with_container(command=["httpd"]))


def test_container_hash_ignores_key_order_and_pod_level_fields() -> None:
    reordered = manifest()
    reordered["spec"]["containers"][0] = dict(reversed(reordered["spec"]["containers"][0].items()))
    assert container_hash(reordered) == container_hash(manifest())
    assert container_hash(manifest(restartPolicy="Never")) == container_hash(manifest())
