"""AppArmor, seccompDefault and SELinux labels without a runtime: which profile a container
gets, the CRI fields it becomes, and the fields' validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.ipc.apimodel.securityspec import AppArmor
from pkletd.ipc.runtime import cri
from pkletd.ipc.runtime.cri import ContainerSpec, SeccompSpec, SELinuxSpec
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.setup import apparmor, runtimespec
from pkletd.supervisor.pods.setup.securitycontext import container_security, sandbox_security

NODE = NodeInfo("n", ("192.0.2.1",), Path("/var/lib/kubelet"), kernel=(6, 1))
SECCOMP_DEFAULT = NodeInfo(
    "n", ("192.0.2.1",), Path("/var/lib/kubelet"), kernel=(6, 1), seccomp_default=True
)
ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
DENY = {"type": "Localhost", "localhostProfile": "k8s-deny"}


def pod(
    pod_sc: dict[str, Any] | None = None,
    container_sc: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> Any:
    c = {"name": "c", "image": "x", **({"securityContext": container_sc} if container_sc else {})}
    return parse_pod(
        {
            "metadata": {"name": "web", "uid": "u-1", "annotations": annotations or {}},
            "spec": {"securityContext": pod_sc, "containers": [c]},
        }
    )


@pytest.mark.parametrize(
    ("pod_sc", "container_sc", "annotations", "profile"),
    [
        ({}, {}, {}, None),
        ({"appArmorProfile": {"type": "RuntimeDefault"}}, {}, {}, AppArmor("RuntimeDefault")),
        (
            {"appArmorProfile": {"type": "RuntimeDefault"}},
            {"appArmorProfile": DENY},
            {},
            AppArmor("Localhost", "k8s-deny"),
        ),
        # the annotation before the pod's field, after the container's
        (
            {"appArmorProfile": {"type": "RuntimeDefault"}},
            {},
            {ANNOTATION + "c": "unconfined"},
            AppArmor("Unconfined"),
        ),
        (
            {},
            {"appArmorProfile": {"type": "RuntimeDefault"}},
            {ANNOTATION + "c": "localhost/other"},
            AppArmor("RuntimeDefault"),
        ),
        ({}, {}, {ANNOTATION + "other": "runtime/default"}, None),  # another container's
    ],
)
def test_apparmor_profile_precedence(
    pod_sc: dict[str, Any],
    container_sc: dict[str, Any],
    annotations: dict[str, str],
    profile: AppArmor | None,
) -> None:
    p = pod(pod_sc, container_sc, annotations)
    assert apparmor.profile(p, p.containers[0]) == profile


@pytest.mark.parametrize(
    ("profile", "wanted", "name"),
    [
        ({"type": "RuntimeDefault"}, cri.pb.SecurityProfile.RuntimeDefault, "runtime/default"),
        ({"type": "Unconfined"}, cri.pb.SecurityProfile.Unconfined, "unconfined"),
        (DENY, cri.pb.SecurityProfile.Localhost, "localhost/k8s-deny"),
    ],
)
def test_apparmor_reaches_the_runtime_in_both_forms(
    profile: dict[str, Any], wanted: int, name: str
) -> None:
    p = pod({}, {"appArmorProfile": profile})
    security = container_security(p, p.containers[0], 0, "", NODE)
    config = cri._container_config(ContainerSpec("c", 0, "x", "l", security=security))
    sc = config.linux.security_context
    assert sc.apparmor.profile_type == wanted
    assert sc.apparmor.localhost_ref == profile.get("localhostProfile", "")
    assert sc.apparmor_profile == name  # the deprecated string containerd 1.6 reads


def test_no_apparmor_profile_leaves_the_runtime_default() -> None:
    p = pod()
    security = container_security(p, p.containers[0], 0, "", NODE)
    sc = cri._container_config(ContainerSpec("c", 0, "x", "l", security=security))
    assert not sc.linux.security_context.HasField("apparmor")
    assert sc.linux.security_context.apparmor_profile == ""


def test_seccomp_default() -> None:
    plain = pod()
    assert container_security(plain, plain.containers[0], 0, "", NODE).seccomp == SeccompSpec(
        "Unconfined"
    )
    assert container_security(
        plain, plain.containers[0], 0, "", SECCOMP_DEFAULT
    ).seccomp == SeccompSpec("RuntimeDefault")
    # A profile the pod or container names wins over the default.
    unconfined = pod({"seccompProfile": {"type": "Unconfined"}})
    found = container_security(unconfined, unconfined.containers[0], 0, "", SECCOMP_DEFAULT)
    assert found.seccomp == SeccompSpec("Unconfined")


def test_selinux_labels() -> None:
    p = pod(
        {"seLinuxOptions": {"level": "s0:c1,c2", "type": "pod_t"}},
        {"seLinuxOptions": {"type": "container_t"}},
    )
    security = container_security(p, p.containers[0], 0, "", NODE)
    assert security.selinux == SELinuxSpec(type="container_t")  # the container's wins whole
    assert sandbox_security(p).selinux == SELinuxSpec(type="pod_t", level="s0:c1,c2")
    sandbox = cri._sandbox_config(runtimespec.sandbox_spec(p, 0, Path("/var/log/pods")))
    label = sandbox.linux.security_context.selinux_options
    assert (label.type, label.level) == ("pod_t", "s0:c1,c2")
    config = cri._container_config(ContainerSpec("c", 0, "x", "l", security=security))
    assert config.linux.security_context.selinux_options.type == "container_t"
    inherited = pod({"seLinuxOptions": {"user": "system_u"}})
    assert container_security(inherited, inherited.containers[0], 0, "", NODE).selinux == (
        SELinuxSpec(user="system_u")
    )
    assert pod().security.selinux is None


@pytest.mark.parametrize(
    ("pod_sc", "container_sc", "annotations", "message"),
    [
        (
            {"appArmorProfile": {"type": "Strict"}},
            {},
            {},
            "spec.securityContext.appArmorProfile.type: unsupported value 'Strict'",
        ),
        (
            {},
            {"appArmorProfile": {}},
            {},
            "spec.containers[0].securityContext.appArmorProfile.type: required value",
        ),
        (
            {},
            {"appArmorProfile": {"type": "Localhost"}},
            {},
            "spec.containers[0].securityContext.appArmorProfile.localhostProfile: required value",
        ),
        (
            {},
            {"appArmorProfile": {"type": "Localhost", "localhostProfile": " p"}},
            {},
            "localhostProfile: invalid value: must not be padded with whitespace",
        ),
        (
            {"appArmorProfile": {"type": "Unconfined", "localhostProfile": "p"}},
            {},
            {},
            "can only be set when AppArmor type is Localhost",
        ),
        (
            {},
            {},
            {ANNOTATION + "c": "strict"},
            f"metadata.annotations[{ANNOTATION}c]: invalid value 'strict': "
            'invalid AppArmor profile name: "strict"',
        ),
        (
            {"supplementalGroupsPolicy": "Loose"},
            {},
            {},
            "spec.securityContext.supplementalGroupsPolicy: unsupported value 'Loose'",
        ),
        (
            {"seLinuxOptions": {"type": 7}},
            {},
            {},
            "spec.securityContext.seLinuxOptions.type: must be a string",
        ),
    ],
)
def test_a_bad_profile_names_its_field(
    pod_sc: dict[str, Any], container_sc: dict[str, Any], annotations: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidPod) as error:
        pod(pod_sc, container_sc, annotations)
    assert message in str(error.value)
