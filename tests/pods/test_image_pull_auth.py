"""Pulls from a private registry (docker-registry with htpasswd, ``tests/harness/registry.py``)
on the real containerd: CRI ``AuthConfig`` as ``CriRuntime.pull_image`` sends it, the
registry's refusal without credentials or with a wrong password.

Every test pushes an image under a name of its own; the module removes them from
containerd when it is done."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.cri import CriError, CriRuntime, RegistryAuth, SandboxSpec

from tests.e2e import free_port
from tests.harness.containerd import PrivateContainerd, cri_target
from tests.harness.images import labelled_busybox
from tests.harness.registry import Registry
from tests.pods.test_image_pull import remove_images

pytestmark = pytest.mark.slow

USER, PASSWORD = "puller", "s3cret-pw"
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


@pytest.mark.parametrize("auth", [None, RegistryAuth(USER, "wrong")], ids=["none", "wrong"])
def test_refused_without_the_right_credentials(
    private_registry: Registry, cri: CriRuntime, auth: RegistryAuth | None
) -> None:
    image = push_private(private_registry, "refused")
    with pytest.raises(CriError) as refused:
        cri.pull_image(image, SANDBOX, auth)
    assert refused.value.code == "UNKNOWN"
    assert refused.value.rpc_message == refusal(private_registry, image)
    assert cri.image_status(image) is None
