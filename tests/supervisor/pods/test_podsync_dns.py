"""Syncing pods on the fake runtime: the sandbox the runtime is asked for carries the pod's
resolver and hostname, each container the hosts mount; a sandbox config that cannot be made
is the kubelet's FailedCreatePodSandBox, and the pod waits in ContainerCreating."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.runtime import cri
from pkletd.ipc.runtime.cri import ContainerID, ContainerSpec, SandboxID, SandboxSpec
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.podsync import FAILED_STEP_RETRY_S
from pkletd.supervisor.pods.types import WaitingReason

from tests.supervisor.pods.unit_helpers import fake_syncer

IMAGE = "busybox:1.36"


class RecordingRuntime(FakeRuntime):
    """The fake runtime, keeping the specs it was given."""

    def __init__(self) -> None:
        super().__init__(images={IMAGE})
        self.sandbox_specs: list[SandboxSpec] = []
        self.container_specs: list[ContainerSpec] = []

    def run_sandbox(self, spec: SandboxSpec) -> SandboxID:
        self.sandbox_specs.append(spec)
        return super().run_sandbox(spec)

    def create_container(
        self, sandbox_id: SandboxID, spec: ContainerSpec, sandbox: SandboxSpec
    ) -> ContainerID:
        self.container_specs.append(spec)
        return super().create_container(sandbox_id, spec, sandbox)


def make(**spec: Any) -> Pod:
    return parse_pod(
        {
            "metadata": {"name": "db-0", "namespace": "shop", "uid": "u1"},
            "spec": {"containers": [{"name": "app", "image": IMAGE}], **spec},
        }
    )


def test_sandbox_and_containers_get_dns_hostname_and_hosts(tmp_path: Path) -> None:
    runtime = RecordingRuntime()
    syncer = fake_syncer(runtime, tmp_path)
    pod = make(subdomain="db", dnsConfig={"options": [{"name": "edns0"}]})
    assert syncer.sync(pod).waiting == {}
    (sandbox,) = runtime.sandbox_specs
    assert sandbox.hostname == "db-0"
    config = cri._sandbox_config(sandbox)
    assert list(config.dns_config.servers) == ["10.96.0.10"]
    assert list(config.dns_config.searches) == [
        "shop.svc.cluster.local",
        "svc.cluster.local",
        "cluster.local",
    ]
    assert list(config.dns_config.options) == ["ndots:5", "edns0"]
    (container,) = runtime.container_specs
    (hosts,) = [m for m in container.mounts if m.container_path == "/etc/hosts"]
    assert (
        Path(hosts.host_path)
        .read_text()
        .endswith("10.88.0.2\tdb-0.db.shop.svc.cluster.local\tdb-0\n")
    )


def test_sandbox_config_failure_is_failed_create_pod_sandbox(tmp_path: Path) -> None:
    runtime = RecordingRuntime()
    events = EventRecorder()
    syncer = fake_syncer(runtime, tmp_path, events=events)
    pod = make(hostname="h" * 40, subdomain="s" * 20, setHostnameAsFQDN=True)
    result = syncer.sync(pod)
    assert result.waiting["app"].reason is WaitingReason.CONTAINER_CREATING
    assert result.retry_in == FAILED_STEP_RETRY_S
    assert "RunPodSandbox" not in runtime.methods()
    (event,) = events.take_new()
    fqdn = f"{'h' * 40}.{'s' * 20}.shop.svc.cluster.local"
    assert (event.type, event.reason, event.object.name) == (
        "Warning",
        "FailedCreatePodSandBox",
        "db-0",
    )
    assert event.message == (
        "Failed to create pod sandbox: failed to construct FQDN from pod hostname and cluster "
        f"domain, FQDN {fqdn} is too long (64 characters is the max, {len(fqdn)} characters "
        "requested)"
    )
