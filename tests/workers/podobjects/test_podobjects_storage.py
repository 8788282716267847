"""The pod-objects worker follows a pod's claim to the storage behind it, against the
real control plane (kube-apiserver's Node authorizer; kube-controller-manager's PV
controller binds), with the node's own credentials: the claim first (missing, then
unbound, read again every 2 s), then once the PV controller has bound it its volume, the
volume's CSIDriver and secret, and, as the driver attaches, its VolumeAttachment until
attached; by GET only, as the node authorizer allows; and nothing more once every
reading is final. The worker's requests are counted as its client sends them (the real
API server keeps no request log a test can read).

The node has no ``controller-managed-attach-detach`` annotation (no kubelet runs it), so
the attach/detach controller leaves it alone: the test makes the VolumeAttachment and
plays the external-attacher."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes.client.exceptions import ApiException
from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apimodel import persistentvolumes as pv
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.workers.podobjects import Options, reading
from pkletd.workers.podobjects.polled import UNSETTLED_S

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.workers.podobjects.podobjects_helpers import NODE, Agent, pod

DRIVER = "hostpath.csi.test"
STORAGE_RESOURCES = (
    "persistentvolumeclaims",
    "persistentvolumes",
    "csidrivers",
    "volumeattachments",
)


BINDING_TIMEOUT = 60.0  # the PV controller binds a claim made before its volume at its resync


@dataclass(frozen=True)
class Sent:
    verb: str
    resource: str
    code: int


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    cluster_kube.core.create_node({"metadata": {"name": NODE}})
    return cluster_kube


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Sent]:
    """Every request the worker's client sends, with its answer's status."""
    found: list[Sent] = []
    call_api = kubeapi.LimitedApiClient.call_api

    def recording(client: kubeapi.LimitedApiClient, method: str, url: str, *args: Any,
                  **kwargs: Any) -> Any:  # fmt: skip
        response = call_api(client, method, url, *args, **kwargs)
        found.append(Sent(method, resource_of(url), int(response.status)))
        return response

    monkeypatch.setattr(kubeapi.LimitedApiClient, "call_api", recording)
    return found


def resource_of(url: str) -> str:
    """The resource a request's path names (``.../persistentvolumes/pv-1``)."""
    parts = urlsplit(url).path.strip("/").split("/")
    return next((p for p in parts if p in STORAGE_RESOURCES), parts[-1])


@pytest.fixture
def agent(control_plane: ControlPlane, kube: Kube, sent: list[Sent]) -> Iterator[Agent]:
    found = Agent(control_plane, Options(NODE))
    yield found
    found.close()


def create_volume(kube: Kube) -> None:
    secret = {"name": "creds", "namespace": "default"}
    csi = {"driver": DRIVER, "volumeHandle": "vol-1", "nodePublishSecretRef": secret}
    spec = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "csi": csi}
    kube.core.create_persistent_volume({"metadata": {"name": "pv-1"}, "spec": spec})
    kube.core.create_namespaced_secret("default", {"metadata": {"name": "creds"}})


def create_claim(kube: Kube) -> None:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    kube.core.create_namespaced_persistent_volume_claim(
        "default", {"metadata": {"name": "data"}, "spec": spec}
    )


def latest(agent: Agent, kind: ObjectKind, name: str) -> ObjectFetched | None:
    sent = [m for m in agent.objects(name) if m.object_kind is kind]
    return sent[-1] if sent else None


def make_attachment(kube: Kube, name: str) -> None:
    """The VolumeAttachment of pv-1 on the node, attached (as the external-attacher says)."""
    source = {"persistentVolumeName": "pv-1"}
    spec = {"attacher": DRIVER, "nodeName": NODE, "source": source}
    kube.storage.create_volume_attachment({"metadata": {"name": name}, "spec": spec})
    kube.set_attached(name)


def attached(agent: Agent, name: str) -> bool:
    found = latest(agent, ObjectKind.VOLUME_ATTACHMENT, name)
    return found is not None and pv.attachment(found.body).attached


def storage_requests(sent: list[Sent]) -> list[Sent]:
    return [r for r in sent if r.resource in STORAGE_RESOURCES]


@pytest.mark.slow
def test_a_claim_is_followed_to_its_volume_driver_secret_and_attachment(
    agent: Agent, kube: Kube, sent: list[Sent]
) -> None:
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    agent.start(pod(kube, "db", volumes=[claim]))
    agent.run_until(lambda: latest(agent, ObjectKind.PERSISTENT_VOLUME_CLAIM, "data"), "claim")
    missing = latest(agent, ObjectKind.PERSISTENT_VOLUME_CLAIM, "data")
    assert missing is not None and missing.missing

    create_claim(kube)
    agent.run_until(
        lambda: (m := latest(agent, ObjectKind.PERSISTENT_VOLUME_CLAIM, "data")) and not m.missing,
        "the claim, read again within 2 s",
    )
    create_volume(kube)  # the PV controller binds the claim to it
    bound = agent.run_until(
        lambda: latest(agent, ObjectKind.PERSISTENT_VOLUME, "pv-1"),
        "the bound volume",
        timeout=BINDING_TIMEOUT,
    )
    assert pv.volume("pv-1", bound.body).csi == pv.CsiSource(
        DRIVER, "vol-1", publish_secret=pv.SecretRef("default", "creds")
    )
    agent.run_until(lambda: latest(agent, ObjectKind.CSI_DRIVER, DRIVER), "the CSIDriver")
    agent.run_until(lambda: latest(agent, ObjectKind.SECRET, "creds"), "the volume's secret")
    name = pv.attachment_name("vol-1", DRIVER, NODE)  # no CSIDriver: the driver attaches
    attachment = agent.run_until(
        lambda: latest(agent, ObjectKind.VOLUME_ATTACHMENT, name), "the attachment"
    )
    assert attachment.missing  # forbidden: the node authorizer cannot tell it is not made yet
    make_attachment(kube, name)
    agent.run_until(lambda: attached(agent, name), "attached")
    agent.run_until(  # the binder sets the claim's volumeName before its phase: maybe read between
        lambda: (
            (m := latest(agent, ObjectKind.PERSISTENT_VOLUME_CLAIM, "data"))
            and pv.claim(m.body).bound
        ),
        "the claim read bound",
    )
    verbs = {r.verb for r in storage_requests(sent)}
    assert verbs == {"GET"}  # the node authorizer allows nodes nothing else on them
    refused = {(r.resource, r.code) for r in storage_requests(sent) if r.code != 200}
    assert refused == {
        ("persistentvolumeclaims", 404),  # not made yet
        ("csidrivers", 404),  # none: the driver attaches
        ("volumeattachments", 403),  # not made yet: the node authorizer cannot tell
    }
    settled = len(storage_requests(sent))
    end = time.monotonic() + 3 * 2.0  # three of the short periods: nothing is read again
    agent.run_until(lambda: time.monotonic() > end, "a quiet while", timeout=10)
    found = storage_requests(sent)
    assert len(found) == settled, found


@pytest.mark.slow
def test_an_attachment_made_late_is_read_again_within_the_short_period(
    agent: Agent, kube: Kube
) -> None:
    """kube-apiserver's node authorizer answers 403, not 404, for a VolumeAttachment not
    made yet (no object, so no edge to the node in its graph): the worker takes it as
    missing and reads it again every 2 s, not on a failed read's back-off (to 30 s)."""
    create_volume(kube)
    create_claim(kube)  # the volume is there: the PV controller binds the claim at once
    agent.start(
        pod(kube, "db", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    )
    name = pv.attachment_name("vol-1", DRIVER, NODE)
    first = agent.run_until(
        lambda: latest(agent, ObjectKind.VOLUME_ATTACHMENT, name),
        "the attachment, not made yet",
        timeout=BINDING_TIMEOUT,
    )
    assert first.missing, first.error

    end = time.monotonic() + 16.0  # a failed read's back-off would be at 16 s by now
    agent.run_until(lambda: time.monotonic() > end, "a while without it", timeout=20)
    assert (latest(agent, ObjectKind.VOLUME_ATTACHMENT, name) or first).missing
    make_attachment(kube, name)
    agent.run_until(
        lambda: attached(agent, name),
        "the attachment read within the short period",
        timeout=UNSETTLED_S + 2.0,
    )


def test_only_an_attachment_refused_is_missing() -> None:
    """A 403 is the node authorizer's word for a VolumeAttachment not made yet; for any
    other object it is a failure, with the API's message."""
    body = json.dumps({"kind": "Status", "message": "forbidden: no relationship found"})
    refused = ApiException(status=403, reason="Forbidden")
    refused.body = body
    attachment = ObjectKey(ObjectKind.VOLUME_ATTACHMENT, "", "csi-0123")
    secret = ObjectKey(ObjectKind.SECRET, "default", "creds")
    assert reading.failed(attachment, refused).missing
    assert not reading.failed(secret, refused).missing
    assert reading.failed(secret, refused).error == "forbidden: no relationship found"
    assert reading.absent(secret, ApiException(status=404, reason="Not Found"))
