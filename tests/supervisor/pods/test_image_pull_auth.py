"""Pulls from a private registry (docker-registry with htpasswd, ``tests/harness/registry.py``)
on the real containerd: CRI ``AuthConfig`` as ``CriRuntime.pull_image`` sends it, the
registry's refusal without credentials or with a wrong password; and end to end, pods of
a node of the real control plane pulling with their image pull secrets (or their service
account's, which kube-apiserver's ServiceAccount admission copies into the pod), read with
the node's credentials, ErrImagePull with the registry's 401 and then ImagePullBackOff
without the right one.

Every test pushes an image under a name of its own; the module removes them from
containerd when it is done."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.runtime.cri import CriError, CriRuntime, RegistryAuth, SandboxSpec

from tests.harness.apiserver.client import Kube
from tests.harness.containerd import PrivateContainerd, cri_target
from tests.harness.controlplane import ControlPlane
from tests.harness.images import labelled_busybox
from tests.harness.node import Pkletd, free_port, join, pod_manifest, wait_for
from tests.harness.registry import Registry
from tests.supervisor.pods.test_image_pull import remove_images

pytestmark = pytest.mark.slow

USER, PASSWORD, WRONG = "puller", "s3cret-pw", "wr0ng-pw"
SANDBOX = SandboxSpec("auth", "default", PodUID("uid-auth"), 0, "auth", "/tmp/none", False)


@pytest.fixture(scope="module")
def private_registry(containerd: PrivateContainerd) -> Iterator[Registry]:
    server = Registry(free_port(), users={USER: PASSWORD})
    server.start()
    containerd.allow_plain_http(server.host)
    try:
        yield server
    finally:
        server.stop()
        remove_images(containerd, f"{server.host}/")


@pytest.fixture
def cri(containerd: PrivateContainerd) -> Iterator[CriRuntime]:
    runtime = CriRuntime(cri_target(containerd.address), timeout=60)
    try:
        yield runtime
    finally:
        runtime.close()


def push_private(registry: Registry, name: str) -> str:
    repository = f"{name}-{uuid.uuid4().hex[:8]}"
    registry.push(repository, "v1", labelled_busybox(f"{repository}:v1"))
    return f"{registry.host}/{repository}:v1"


def refusal(registry: Registry, image: str) -> str:
    """containerd's message when the registry answers 401 (a CRI Unknown error)."""
    return (
        f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": '
        f"pulling from host {registry.host} failed with status code [manifests v1]: "
        "401 Unauthorized"
    )


def test_pull_with_auth_config(private_registry: Registry, cri: CriRuntime) -> None:
    image = push_private(private_registry, "authed")
    cri.pull_image(image, SANDBOX, RegistryAuth(USER, PASSWORD))
    assert cri.image_status(image) is not None


@pytest.mark.parametrize("auth", [None, RegistryAuth(USER, WRONG)], ids=["none", "wrong"])
def test_refused_without_the_right_credentials(
    private_registry: Registry, cri: CriRuntime, auth: RegistryAuth | None
) -> None:
    image = push_private(private_registry, "refused")
    with pytest.raises(CriError) as refused:
        cri.pull_image(image, SANDBOX, auth)
    assert refused.value.code == "UNKNOWN"
    assert refused.value.rpc_message == refusal(private_registry, image)
    assert cri.image_status(image) is None


# --- through pkletd, a node of the real control plane --------------------------------------


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


def dockerconfigjson(registry: Registry, password: str) -> dict[str, Any]:
    """A ``kubernetes.io/dockerconfigjson`` Secret's body, as ``kubectl create secret
    docker-registry`` makes it (``auth``: base64 of ``user:password``)."""
    auth = base64.b64encode(f"{USER}:{password}".encode()).decode()
    config = {"auths": {registry.host: {"username": USER, "password": password, "auth": auth}}}
    return {
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }


def private_pod(agent: Pkletd, name: str, image: str, *secrets: str, **spec: Any) -> dict[str, Any]:
    pod = pod_manifest(name)
    pod["metadata"]["namespace"] = "default"
    pod["spec"]["containers"][0].update(image=image, imagePullPolicy="IfNotPresent")
    pod["spec"].update(nodeName=agent.node, automountServiceAccountToken=False, **spec)
    if secrets:
        pod["spec"]["imagePullSecrets"] = [{"name": secret} for secret in secrets]
    return pod


def waiting_as(kube: Kube, name: str, reason: str) -> dict[str, Any] | None:
    """The pod's container waiting with ``reason``, as the API shows it."""
    status = kube.core.read_namespaced_pod_status(name, "default").status
    waiting = (status.container_statuses or [None])[0]
    state = waiting.state.waiting if waiting is not None else None
    return (
        {"reason": state.reason, "message": state.message}
        if state and state.reason == reason
        else None
    )


def pod_events(agent: Pkletd, name: str) -> list[tuple[str, str, str]]:
    return [
        (e["type"], e["reason"], e["message"])
        for e in agent.events()
        if e["object"] == f"default/{name}"
    ]


def secret_reads(plane: ControlPlane, agent: Pkletd, name: str) -> list[tuple[str, int]]:
    """The node's completed requests for the Secret ``name``, as kube-apiserver's audit log
    has them: (verb, response code)."""
    events = plane.audit_events("secrets", user=f"system:node:{agent.node}")
    return [
        (str(e["verb"]), int(e["responseStatus"]["code"]))  # type: ignore[index]
        for e in events
        if e["objectRef"]["name"] == name  # type: ignore[index]
    ]


def test_a_private_image_is_pulled_with_the_pods_or_its_service_accounts_secret(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube, private_registry: Registry
) -> None:
    own, inherited = push_private(private_registry, "own"), push_private(private_registry, "sa")
    kube.core.create_namespaced_secret(
        "default", {"metadata": {"name": "regcred"}, **dockerconfigjson(private_registry, PASSWORD)}
    )
    kube.core.create_namespaced_service_account(
        "default", {"metadata": {"name": "puller"}, "imagePullSecrets": [{"name": "regcred"}]}
    )
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", private_pod(pkletd, "own", own, "gone", "regcred"))
    kube.core.create_namespaced_pod(
        "default", private_pod(pkletd, "inherited", inherited, serviceAccountName="puller")
    )

    pkletd.wait_api_pod("own", timeout=60)
    pkletd.wait_api_pod("inherited", timeout=60)
    seen = pod_events(pkletd, "own")
    assert seen[0] == (
        "Warning",
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (gone); attempting to pull the image may "
        "not succeed.",
    )
    assert ("Normal", "Pulling", f'Pulling image "{own}"') in seen
    assert [r for _, r, _ in pod_events(pkletd, "inherited")][:2] == ["Pulling", "Pulled"]
    # kube-apiserver's ServiceAccount admission copied the account's secrets into the pod
    inherited_spec = kube.core.read_namespaced_pod("inherited", "default").spec
    assert [s.name for s in inherited_spec.image_pull_secrets] == ["regcred"]
    # each listed (and then watched) by its name, by the node itself: the Node authorizer
    # lets it see its pods' secrets, and "gone" is an empty list
    for name in ("regcred", "gone"):
        assert ("list", 200) in secret_reads(control_plane, pkletd, name), name


def test_refused_without_a_secret_or_with_a_wrong_password(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube, private_registry: Registry
) -> None:
    image = push_private(private_registry, "refused")
    kube.core.create_namespaced_secret(
        "default", {"metadata": {"name": "stale"}, **dockerconfigjson(private_registry, WRONG)}
    )
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", private_pod(pkletd, "anonymous", image))
    kube.core.create_namespaced_pod("default", private_pod(pkletd, "wrong", image, "stale"))

    refused = refusal(private_registry, image)
    for name in ("anonymous", "wrong"):
        failed = wait_for(
            f"{name}: ErrImagePull", lambda n=name: waiting_as(kube, n, "ErrImagePull")
        )
        assert failed["message"] == refused
        backing_off = wait_for(
            f"{name}: ImagePullBackOff",
            lambda n=name: waiting_as(kube, n, "ImagePullBackOff"),
        )
        assert backing_off["message"] == f'Back-off pulling image "{image}"'
        assert pod_events(pkletd, name)[:3] == [
            ("Normal", "Pulling", f'Pulling image "{image}"'),
            ("Warning", "Failed", f'Failed to pull image "{image}": {refused}'),
            ("Warning", "Failed", "Error: ErrImagePull"),
        ]
    logs = (pkletd.base / "stderr.log").read_text()
    assert f"registry={private_registry.host} secret=stale" in logs
    assert WRONG not in logs
