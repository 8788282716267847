"""Admission of what this node cannot give, without a runtime: hostUsers: false, AppArmor on
a host without it, supplementalGroupsPolicy: Strict, pod-level resources, resourceClaims;
each refused with the kubelet's reason and message, never run without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import parse_pod
from pkletd.supervisor.pods import admission
from pkletd.supervisor.pods.admission import Rejection
from pkletd.supervisor.pods.events import Reason
from pkletd.supervisor.pods.setup import apparmor

APPARMOR_OFF = admission.Node("n", 10, {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30})
APPARMOR_ON = admission.Node(
    "n", 10, {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30}, apparmor=True
)
ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
NOT_ENABLED = Rejection(
    Reason.APPARMOR, "Cannot enforce AppArmor: AppArmor is not enabled on the host"
)


def pod(annotations: dict[str, str] | None = None, container: Any = None, **spec: Any) -> Any:
    c = {"name": "c", "image": "x", **({"securityContext": container} if container else {})}
    return parse_pod(
        {
            "metadata": {"name": "web", "uid": "u-1", "annotations": annotations or {}},
            "spec": {"containers": [c], **spec},
        }
    )


def admit(p: Any, node: admission.Node = APPARMOR_OFF) -> Rejection | None:
    return admission.admit(p, [], node)


def test_host_users_false_is_refused() -> None:
    assert admit(pod(hostUsers=False)) == Rejection(
        Reason.POD_FEATURE_UNSUPPORTED,
        "can't set `spec.hostUsers: false`, runtime does not support user namespaces",
    )
    assert admit(pod(hostUsers=True)) is None
    assert admit(pod()) is None


@pytest.mark.parametrize(
    ("annotations", "container", "spec", "refused"),
    [
        ({}, {"appArmorProfile": {"type": "RuntimeDefault"}}, {}, True),
        ({}, {}, {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}, True),
        (
            {},
            {"appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-deny"}},
            {},
            True,
        ),
        ({ANNOTATION + "c": "runtime/default"}, {}, {}, True),
        ({ANNOTATION + "c": "localhost/k8s-deny"}, {}, {}, True),
        # Unconfined asks nothing of the host
        ({}, {"appArmorProfile": {"type": "Unconfined"}}, {}, False),
        ({ANNOTATION + "c": "unconfined"}, {}, {}, False),
        ({}, {}, {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}, False),
        ({}, {}, {}, False),
    ],
)
def test_apparmor_on_a_host_without_it(
    annotations: dict[str, str], container: Any, spec: dict[str, Any], refused: bool
) -> None:
    p = pod(annotations, container, **spec)
    assert admit(p) == (NOT_ENABLED if refused else None)
    assert admit(p, APPARMOR_ON) is None


def test_apparmor_localhost_annotation_without_a_name() -> None:
    p = pod({ANNOTATION + "c": "localhost/"})
    assert admit(p) == NOT_ENABLED
    assert admit(p, APPARMOR_ON) == Rejection(
        Reason.APPARMOR,
        'Cannot enforce AppArmor: invalid empty AppArmor profile name: "localhost/"',
    )


def test_host_apparmor(tmp_path: Path) -> None:
    enabled, securityfs = tmp_path / "enabled", tmp_path / "apparmor"
    assert not apparmor.host_enabled(enabled, securityfs)  # neither exists
    enabled.write_text("Y\n")
    assert not apparmor.host_enabled(enabled, securityfs)  # no securityfs
    securityfs.mkdir()
    assert apparmor.host_enabled(enabled, securityfs)
    enabled.write_text("N\n")
    assert not apparmor.host_enabled(enabled, securityfs)


def test_supplemental_groups_policy_strict() -> None:
    strict = pod(securityContext={"supplementalGroupsPolicy": "Strict"})
    assert admit(strict) == Rejection(
        Reason.SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED,
        "SupplementalGroupsPolicy=Strict is not supported in this node",
    )
    assert admit(pod(securityContext={"supplementalGroupsPolicy": "Merge"})) is None


def test_pod_level_resources_and_resource_claims() -> None:
    pod_level = pod(resources={"limits": {"cpu": "1"}})
    assert admit(pod_level) == Rejection(
        Reason.POD_LEVEL_RESOURCES_NOT_SUPPORTED, "PodLevelResources feature gate is disabled"
    )
    assert admit(pod(resources={})) is None
    claims = pod(resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}])
    assert admit(claims) == Rejection(
        Reason.POD_FEATURE_UNSUPPORTED,
        "spec.resourceClaims: pkletd does not serve dynamic resource allocation",
    )


def test_the_kubelet_order_sysctls_first_node_shutdown_last() -> None:
    """A pod refused for several reasons gets the first handler's."""
    p = pod(
        hostUsers=False,
        securityContext={
            "sysctls": [{"name": "kernel.msgmax", "value": "1"}],
            "appArmorProfile": {"type": "RuntimeDefault"},
        },
    )
    assert admit(p).reason is Reason.SYSCTL_FORBIDDEN  # type: ignore[union-attr]
    p = pod(hostUsers=False, securityContext={"appArmorProfile": {"type": "RuntimeDefault"}})
    assert admit(p) == NOT_ENABLED
    admitter = admission.Admitter(APPARMOR_ON)
    admitter.refusal = Rejection(Reason.NODE_SHUTDOWN, "Node is shutting down")
    assert admitter.admit(pod(hostUsers=False), []).reason is Reason.POD_FEATURE_UNSUPPORTED  # type: ignore[union-attr]


def test_hugepages_are_refused() -> None:
    resources = {"limits": {"hugepages-2Mi": "4Mi", "memory": "64Mi"}}
    asked = pod(containers=[{"name": "c", "image": "x", "resources": resources}])
    assert admit(asked) == Rejection(
        Reason.POD_FEATURE_UNSUPPORTED,
        'pkletd does not serve hugepages: container "c" asks for hugepages-2Mi',
    )
    mounted = pod(volumes=[{"name": "huge", "emptyDir": {"medium": "HugePages"}}])
    assert admit(mounted) == Rejection(
        Reason.POD_FEATURE_UNSUPPORTED,
        'pkletd does not serve hugepages: volume "huge" has medium HugePages',
    )
    plain = {"limits": {"memory": "64Mi"}}
    assert admit(pod(containers=[{"name": "c", "image": "x", "resources": plain}])) is None
