"""The pod-objects worker follows a pod's claim to the storage behind it, against the
local API server, with the node's own credentials: the claim first (missing, then
unbound, read again every 2 s), then once it is bound its volume, the volume's CSIDriver
and secret, and, as the driver attaches, its VolumeAttachment until attached; by GET
only, as the node authorizer allows; and nothing more once every reading is final."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from pkletd.ipc.apimodel import persistentvolumes as pv
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.workers.podobjects import Options

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.workers.podobjects.test_podobjects import NODE, NODE_USER, Agent, pod

DRIVER = "hostpath.csi.test"
STORAGE_RESOURCES = (
    "persistentvolumeclaims",
    "persistentvolumes",
    "csidrivers",
    "volumeattachments",
)


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[Kube]:
    admin = Kube(apiserver)
    admin.core.create_node({"metadata": {"name": NODE}})
    yield admin
    admin.close()


@pytest.fixture
def agent(apiserver: ApiServer, kube: Kube) -> Iterator[Agent]:
    found = Agent(apiserver, Options(NODE))
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


def storage_requests(server: ApiServer) -> list[Any]:
    return [r for r in server.requests(user=NODE_USER) if r.resource in STORAGE_RESOURCES]


def test_a_claim_is_followed_to_its_volume_driver_secret_and_attachment(
    agent: Agent, kube: Kube, apiserver: ApiServer
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
    create_volume(kube)
    kube.bind("default/data", "pv-1")
    bound = agent.run_until(
        lambda: latest(agent, ObjectKind.PERSISTENT_VOLUME, "pv-1"), "the bound volume"
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
    assert attachment.missing or not pv.attachment(attachment.body).attached
    source = {"persistentVolumeName": "pv-1"}
    kube.storage.create_volume_attachment(
        {
            "metadata": {"name": name},
            "spec": {"attacher": DRIVER, "nodeName": NODE, "source": source},
        }
    )
    kube.set_attached(name)
    agent.run_until(
        lambda: (
            (m := latest(agent, ObjectKind.VOLUME_ATTACHMENT, name))
            and pv.attachment(m.body).attached
        ),
        "attached",
    )
    agent.run_until(  # bind() sets the claim's volumeName before its phase: maybe read between
        lambda: (
            (m := latest(agent, ObjectKind.PERSISTENT_VOLUME_CLAIM, "data"))
            and pv.claim(m.body).bound
        ),
        "the claim read bound",
    )
    verbs = {r.verb for r in storage_requests(apiserver)}
    assert verbs == {"GET"}  # the node authorizer allows nodes nothing else on them
    settled = len(storage_requests(apiserver))
    end = time.monotonic() + 3 * 2.0  # three of the short periods: nothing is read again
    agent.run_until(lambda: time.monotonic() > end, "a quiet while", timeout=10)
    found = storage_requests(apiserver)
    assert len(found) == settled, [(r.verb, r.resource, r.code) for r in found]
