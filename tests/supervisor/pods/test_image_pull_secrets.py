"""The image puller with a pod's image pull secrets, on the fake runtime: the credentials
that fit the image sent in turn as CRI AuthConfig, an anonymous pull when none fits, a
pending secret waited for, a missing one warned about, a bad one failing the pull, and no
credential in any log line."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, PodUID, parse_pod
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.ipc.runtime.cri import RegistryAuth, SandboxSpec
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.images import ImagePuller
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podmetrics import PodMetrics
from pkletd.supervisor.pods.types import Waiting, WaitingReason

REGISTRY = "registry.example:5000"
IMAGE = f"{REGISTRY}/team/app:v1"
REFUSED = (
    f'failed to pull and unpack image "{IMAGE}": failed to resolve reference "{IMAGE}": '
    f"pulling from host {REGISTRY} failed with status code [manifests v1]: 401 Unauthorized"
)
SANDBOX = SandboxSpec("web", "default", PodUID("u1"), 0, "web", "/tmp/none", False)


class Node:
    """An image puller on the fake runtime, with the API objects it reads secrets from."""

    def __init__(self) -> None:
        self.runtime = FakeRuntime()
        self.events = EventRecorder()
        self.objects = ApiObjects()
        self.puller = ImagePuller(self.runtime, self.events, self.objects, PodMetrics().startup)

    def secret(self, name: str, auths: dict[str, Any], secret_type: str = "") -> None:
        data = {".dockerconfigjson": json.dumps({"auths": auths}).encode()}
        self.raw_secret(name, data, secret_type or "kubernetes.io/dockerconfigjson")

    def raw_secret(self, name: str, data: dict[str, bytes], secret_type: str) -> None:
        fetched = ObjectFetched(
            ObjectKind.SECRET, "default", name, data=data, secret_type=secret_type
        )
        self.objects.on_fetched(fetched)

    def missing(self, name: str) -> None:
        self.objects.on_fetched(
            ObjectFetched(
                ObjectKind.SECRET, "default", name, error=f'secret "{name}" not found', missing=True
            )
        )

    def ensure(self, pod: Pod) -> object:
        return self.puller.ensure(pod, pod.containers[0], SANDBOX)

    def seen(self) -> list[tuple[str, str, str]]:
        return [(e["type"], e["reason"], e["message"]) for e in self.events.recent()]


def pod(*secrets: str, image: str = IMAGE) -> Pod:
    return parse_pod(
        {
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {
                "containers": [{"name": "app", "image": image}],
                "imagePullSecrets": [{"name": name} for name in secrets],
            },
        }
    )


def user(name: str, password: str = "s3cret") -> dict[str, str]:
    return {"username": name, "password": password}


@pytest.fixture
def node() -> Node:
    return Node()


def test_the_fitting_credential_goes_with_the_pull(node: Node) -> None:
    node.secret("regcred", {REGISTRY: user("alice"), "other.example": user("mallory")})
    got = node.ensure(pod("regcred"))

    assert not isinstance(got, Waiting)
    assert node.runtime.pulls == [(IMAGE, RegistryAuth("alice", "s3cret"))]
    assert [reason for _, reason, _ in node.seen()] == ["Pulling", "Pulled"]


def test_no_fitting_credential_pulls_anonymously(node: Node) -> None:
    node.secret("regcred", {"other.example": user("mallory")})
    node.ensure(pod("regcred"))
    assert node.runtime.pulls == [(IMAGE, None)]


def test_each_fitting_credential_in_turn_until_one_works(node: Node) -> None:
    node.secret("old", {REGISTRY: user("alice", "expired")})
    node.secret("new", {f"{REGISTRY}/team": user("bob"), REGISTRY: user("carol")})
    node.runtime.fail("PullImage", "UNKNOWN", REFUSED)  # bob's, the most specific, is refused

    got = node.ensure(pod("old", "new"))

    assert not isinstance(got, Waiting)
    assert [auth and auth.username for _, auth in node.runtime.pulls] == ["bob", "alice"]


def test_every_credential_refused_is_err_image_pull_then_back_off(node: Node) -> None:
    node.secret("regcred", {REGISTRY: user("alice", "wrong"), f"http://{REGISTRY}": user("bob")})
    node.runtime.fail("PullImage", "UNKNOWN", REFUSED)
    node.runtime.fail("PullImage", "UNKNOWN", REFUSED)
    the_pod = pod("regcred")

    got = node.ensure(the_pod)

    assert got == Waiting(WaitingReason.ERR_IMAGE_PULL, REFUSED)  # one message, said once
    assert len(node.runtime.pulls) == 2
    assert node.seen() == [
        ("Normal", "Pulling", f'Pulling image "{IMAGE}"'),
        ("Warning", "Failed", f'Failed to pull image "{IMAGE}": {REFUSED}'),
    ]
    assert node.puller.backoff_left(the_pod, the_pod.containers[0]) > 0


def test_different_refusals_are_listed_as_the_kubelets_aggregate_error(node: Node) -> None:
    node.secret("regcred", {REGISTRY: user("alice", "wrong"), f"{REGISTRY}/team": user("bob")})
    node.runtime.fail("PullImage", "UNKNOWN", "403 Forbidden")
    node.runtime.fail("PullImage", "UNKNOWN", REFUSED)
    got = node.ensure(pod("regcred"))
    assert got == Waiting(WaitingReason.ERR_IMAGE_PULL, f"[403 Forbidden, {REFUSED}]")


def test_a_secret_not_read_yet_holds_the_pull(node: Node) -> None:
    node.secret("regcred", {REGISTRY: user("alice")})
    got = node.ensure(pod("regcred", "later"))

    assert got == Waiting(WaitingReason.CONTAINER_CREATING, "")
    assert node.runtime.pulls == [] and node.seen() == []

    node.secret("later", {})
    assert not isinstance(node.ensure(pod("regcred", "later")), Waiting)


def test_a_missing_secret_is_warned_about_and_the_rest_used(node: Node) -> None:
    node.missing("gone")
    node.secret("regcred", {REGISTRY: user("alice")})
    node.ensure(pod("gone", "regcred"))

    assert node.runtime.pulls == [(IMAGE, RegistryAuth("alice", "s3cret"))]
    assert node.seen()[0] == (
        "Warning",
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (gone); attempting to pull the image may "
        "not succeed.",
    )
    event = node.events.take_new()[0]
    assert event.object.field_path == ""  # about the pod, not the container


def test_a_bad_secret_fails_the_pull_with_a_clear_error(node: Node) -> None:
    node.raw_secret("broken", {".dockerconfigjson": b"{not json"}, "kubernetes.io/dockerconfigjson")
    got = node.ensure(pod("broken"))

    assert isinstance(got, Waiting) and got.reason is WaitingReason.ERR_IMAGE_PULL
    assert got.message.startswith(
        'image pull secret "broken": .dockerconfigjson: invalid JSON: '
    ), got.message
    assert node.runtime.pulls == []
    assert [reason for _, reason, _ in node.seen()] == ["Pulling", "Failed"]


def test_an_image_present_needs_no_secret(node: Node) -> None:
    node.runtime.images.add(IMAGE)
    assert not isinstance(node.ensure(pod("never-read")), Waiting)
    assert node.runtime.pulls == []


def test_no_credential_reaches_a_log_line(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    node.secret("regcred", {REGISTRY: user("alice", "hunter2")})
    node.runtime.fail("PullImage", "UNKNOWN", REFUSED)
    node.ensure(pod("regcred"))

    assert "hunter2" not in caplog.text
    assert f"registry={REGISTRY} secret=regcred" in caplog.text
