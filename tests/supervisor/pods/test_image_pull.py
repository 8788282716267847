"""Image pulls on the real containerd, from a private registry (``tests/harness/registry.py``):
pull policies, the kubelet's image events, ErrImagePull and ImagePullBackOff.

Every test pushes images under names of its own; the module removes them from
containerd when it is done."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cri_api.v1 import api_pb2

from tests.harness.containerd import PrivateContainerd, cri_channel, image_service
from tests.harness.images import labelled_busybox
from tests.harness.node import BUSYBOX, NODE, Pkletd, api_pod, free_port, pod_manifest, wait_for
from tests.harness.registry import Registry

pytestmark = pytest.mark.slow

PULLED = re.compile(
    r'Successfully pulled image "(?P<image>[^"]+)" in \S+ \(\S+ including waiting\)\. '
    r"Image size: [1-9]\d* bytes\."
)


@pytest.fixture(scope="module")
def registry(containerd: PrivateContainerd) -> Iterator[Registry]:
    server = Registry(free_port())
    server.start()
    containerd.allow_plain_http(server.host)
    try:
        yield server
    finally:
        server.stop()
        remove_images(containerd, f"{server.host}/")


def remove_images(containerd: PrivateContainerd, prefix: str) -> None:
    with cri_channel(containerd.address) as channel:
        images = image_service(channel)
        for image in images.ListImages(api_pb2.ListImagesRequest(), timeout=30).images:
            if any(ref.startswith(prefix) for ref in [*image.repo_tags, *image.repo_digests]):
                spec = api_pb2.ImageSpec(image=image.id)
                images.RemoveImage(api_pb2.RemoveImageRequest(image=spec), timeout=30)


def push(registry: Registry, name: str, tag: str = "v1") -> tuple[str, str]:
    """Push a busybox image of its own as ``<name>-<random>:tag``; its reference and digest."""
    repository = f"{name}-{uuid.uuid4().hex[:8]}"
    digest = registry.push(repository, tag, labelled_busybox(f"{repository}:{tag}"))
    return f"{registry.host}/{repository}:{tag}", digest


def pull_directly(containerd: PrivateContainerd, image: str) -> None:
    """Pull through the CRI, as if another pod had pulled it before."""
    request = api_pb2.PullImageRequest(image=api_pb2.ImageSpec(image=image))
    with cri_channel(containerd.address) as channel:
        image_service(channel).PullImage(request, timeout=60)


def manifest(name: str, *containers: tuple[str, str]) -> dict[str, Any]:
    """A pod with one container ``c<i>`` per (image, imagePullPolicy)."""
    pod = pod_manifest(name, containers=len(containers))
    for spec, (image, policy) in zip(pod["spec"]["containers"], containers, strict=True):
        spec.update(image=image, imagePullPolicy=policy)
    return pod


def events(agent: Pkletd, name: str) -> list[tuple[str, str, str]]:
    """The pod's events so far: (type, reason, message), oldest first."""
    found = agent.events()
    return [(e["type"], e["reason"], e["message"]) for e in found if e["object"] == full(name)]


def full(name: str) -> str:
    return f"default/{name}-{NODE}"


def waiting(agent: Pkletd, name: str, container: str = "c0") -> dict[str, Any]:
    """The container's waiting state, as the API shows it ({} if it is not waiting)."""
    pod = api_pod(agent, name) or {}
    statuses = {s["name"]: s for s in pod.get("status", {}).get("containerStatuses", [])}
    return dict(statuses.get(container, {}).get("state", {}).get("waiting", {}))


def test_image_only_in_the_registry_is_pulled(pkletd: Pkletd, registry: Registry) -> None:
    image, digest = push(registry, "fetch")
    pkletd.start()
    pkletd.put("fetch", manifest("fetch", (image, "IfNotPresent")))
    pkletd.wait_running("fetch", timeout=60)

    status = api_pod(pkletd, "fetch")["status"]["containerStatuses"][0]
    assert status["image"] == image
    assert status["imageID"].endswith(f"@{digest}"), status["imageID"]
    seen = events(pkletd, "fetch")
    assert seen[0] == ("Normal", "Pulling", f'Pulling image "{image}"')
    assert seen[1][:2] == ("Normal", "Pulled")
    pulled = PULLED.fullmatch(seen[1][2])
    assert pulled is not None and pulled["image"] == image, seen[1][2]

    # a second pod finds it on the node
    pkletd.put("again", manifest("again", (image, "IfNotPresent")))
    pkletd.wait_running("again")
    assert events(pkletd, "again") == [
        ("Normal", "Pulled", f'Container image "{image}" already present on machine'),
        ("Normal", "Created", "Created container c0"),
        ("Normal", "Started", "Started container c0"),
    ]


def test_always_pulls_again_when_present(
    pkletd: Pkletd, containerd: PrivateContainerd, registry: Registry
) -> None:
    image, _ = push(registry, "always")
    pull_directly(containerd, image)
    repository, tag = image.removeprefix(f"{registry.host}/").rsplit(":", 1)
    newer = registry.push(repository, tag, labelled_busybox(f"{image} newer"))
    pkletd.start()
    pkletd.put("always", manifest("always", (image, "Always")))
    pkletd.wait_running("always", timeout=60)

    status = api_pod(pkletd, "always")["status"]["containerStatuses"][0]
    assert status["imageID"].endswith(f"@{newer}"), status["imageID"]  # the tag's new image
    reasons = [reason for _, reason, _ in events(pkletd, "always")]
    assert reasons == ["Pulling", "Pulled", "Created", "Started"]
    assert PULLED.fullmatch(events(pkletd, "always")[1][2])


def test_missing_image_backs_off_and_spares_other_pods(pkletd: Pkletd, registry: Registry) -> None:
    missing = f"{registry.host}/missing-{uuid.uuid4().hex[:8]}:v1"
    pkletd.start()
    pkletd.put("ghost", manifest("ghost", (missing, "IfNotPresent")))
    pkletd.put("bystander", manifest("bystander", (BUSYBOX, "IfNotPresent")))

    failed = wait_for(
        "ErrImagePull",
        lambda: (w := waiting(pkletd, "ghost")).get("reason") == "ErrImagePull" and w,
    )
    assert failed["message"].startswith(
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{missing}"'
    ), failed
    assert failed["message"].endswith("not found"), failed
    pkletd.wait_running("bystander")

    backing_off = wait_for(  # seconds after the failed pull, as under the kubelet
        "ImagePullBackOff",
        lambda: (w := waiting(pkletd, "ghost")).get("reason") == "ImagePullBackOff" and w,
        timeout=8,
    )
    assert backing_off["message"] == f'Back-off pulling image "{missing}"'
    assert api_pod(pkletd, "ghost")["status"]["phase"] == "Pending"
    seen = events(pkletd, "ghost")
    assert seen[:3] == [
        ("Normal", "Pulling", f'Pulling image "{missing}"'),
        ("Warning", "Failed", f'Failed to pull image "{missing}": {failed["message"]}'),
        ("Warning", "Failed", "Error: ErrImagePull"),
    ]
    backing = seen.index(("Normal", "BackOff", f'Back-off pulling image "{missing}"'))
    assert seen[backing + 1] == ("Warning", "Failed", "Error: ImagePullBackOff")
    assert not [e for e in seen if e[1] == "Pulled"]

    bystander = pkletd.pod("bystander")
    assert bystander is not None and bystander["phase"] == "Running"
    assert bystander["containers"][0]["restart_count"] == 0


def test_never_policy_with_a_missing_image(pkletd: Pkletd, registry: Registry) -> None:
    missing = f"{registry.host}/never-{uuid.uuid4().hex[:8]}:v1"
    pkletd.start()
    pkletd.put("never", manifest("never", (BUSYBOX, "Never"), (missing, "Never")))

    refused = wait_for(
        "ErrImageNeverPull",
        lambda: (w := waiting(pkletd, "never", "c1")).get("reason") == "ErrImageNeverPull" and w,
    )
    message = f'Container image "{missing}" is not present with pull policy of Never'
    assert refused["message"] == message
    wait_for(
        "c0 running",
        lambda: (pod := pkletd.pod("never")) and pod["containers"][0]["state"] == "running",
    )
    assert api_pod(pkletd, "never")["status"]["phase"] == "Pending"
    seen = events(pkletd, "never")
    assert ("Normal", "Pulled", f'Container image "{BUSYBOX}" already present on machine') in seen
    refusal = seen.index(("Warning", "ErrImageNeverPull", message))
    assert seen[refusal + 1] == ("Warning", "Failed", "Error: ErrImageNeverPull")
    assert not [e for e in seen if e[1] == "Pulling"]
