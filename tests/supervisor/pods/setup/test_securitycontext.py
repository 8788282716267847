"""Security contexts without a runtime: merging, runAsNonRoot, CRI fields, validation, and
the CRI messages they become (sysctl admission: ``tests/pods/test_sysctls.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.ipc.runtime import cri
from pkletd.ipc.runtime.cri import ContainerSpec, SeccompSpec
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.setup import runtimespec, securitycontext
from pkletd.supervisor.pods.setup.securitycontext import (
    DEFAULT_MASKED_PATHS,
    DEFAULT_READONLY_PATHS,
    container_security,
    sandbox_security,
    verify_run_as_non_root,
)

NODE = NodeInfo("n", ("192.0.2.1",), Path("/var/lib/kubelet"), kernel=(6, 1))


def pod(pod_sc: dict[str, Any] | None = None, *containers: dict[str, Any], **spec: Any) -> Any:
    listed = [
        {"name": f"c{i}", "image": "x", **({"securityContext": sc} if sc else {})}
        for i, sc in enumerate(containers or ({},))
    ]
    return parse_pod(
        {
            "metadata": {"name": "web", "namespace": "prod", "uid": "u-1"},
            "spec": {"securityContext": pod_sc, "containers": listed, **spec},
        }
    )


@pytest.mark.parametrize(
    ("pod_sc", "container_sc", "image_uid", "image_user", "message"),
    [
        ({}, {}, 0, "", None),  # not asked
        ({"runAsNonRoot": False}, {}, 0, "", None),
        (
            {"runAsNonRoot": True},
            {},
            0,
            "",
            "container has runAsNonRoot and image will run as root",
        ),
        ({"runAsNonRoot": True}, {}, 1000, "", None),
        (
            {"runAsNonRoot": True},
            {},
            None,
            "app",
            "container has runAsNonRoot and image has non-numeric user (app), "
            "cannot verify user is non-root",
        ),
        (
            {"runAsNonRoot": True},
            {"runAsUser": 0},
            1000,
            "",
            "container's runAsUser breaks non-root policy",
        ),
        (
            {"runAsNonRoot": True, "runAsUser": 0},
            {},
            1000,
            "",
            "container's runAsUser breaks non-root policy",
        ),
        ({"runAsNonRoot": True, "runAsUser": 0}, {"runAsUser": 7}, 0, "", None),
        ({"runAsNonRoot": True}, {"runAsNonRoot": False}, 0, "", None),  # the container wins
        (
            {},
            {"runAsNonRoot": True},
            0,
            "",
            "container has runAsNonRoot and image will run as root",
        ),
    ],
)
def test_run_as_non_root(
    pod_sc: dict[str, Any],
    container_sc: dict[str, Any],
    image_uid: int | None,
    image_user: str,
    message: str | None,
) -> None:
    p = pod(pod_sc, container_sc)
    found = verify_run_as_non_root(p, p.containers[0], image_uid, image_user)
    if message is None:
        assert found is None
    else:
        assert found == f'{message} (pod: "web_prod(u-1)", container: c0)'


def test_container_security_merges_pod_and_container() -> None:
    p = pod(
        {
            "runAsUser": 1000,
            "runAsGroup": 3000,
            "fsGroup": 2000,
            "supplementalGroups": [4000, 5000],
            "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"},
        },
        {
            "runAsGroup": 3500,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
        },
    )
    sc = container_security(p, p.containers[0], 0, "", NODE)
    assert (sc.run_as_user, sc.run_as_username, sc.run_as_group) == (1000, "", 3500)
    assert sc.supplemental_groups == (2000, 4000, 5000)  # fsGroup first
    assert (sc.readonly_rootfs, sc.no_new_privs, sc.privileged) == (True, True, False)
    assert (sc.add_capabilities, sc.drop_capabilities) == (("NET_ADMIN",), ("ALL",))
    assert sc.seccomp == SeccompSpec("Localhost", "/var/lib/kubelet/seccomp/profiles/audit.json")
    assert (sc.masked_paths, sc.readonly_paths) == (DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS)


def test_container_security_defaults_and_image_user() -> None:
    p = pod()
    sc = container_security(p, p.containers[0], None, "nginx", NODE)
    assert (sc.run_as_user, sc.run_as_username, sc.run_as_group) == (None, "nginx", None)
    assert sc.seccomp == SeccompSpec("Unconfined")  # seccompDefault is off
    assert not sc.no_new_privs  # allowPrivilegeEscalation unset: the kubelet adds nothing
    assert sc.supplemental_groups == ()
    sc = container_security(p, p.containers[0], 33, "", NODE)
    assert (sc.run_as_user, sc.run_as_username) == (33, "")


def test_seccomp_precedence_and_proc_mount() -> None:
    p = pod(
        {"seccompProfile": {"type": "RuntimeDefault"}},
        {"seccompProfile": {"type": "Unconfined"}, "procMount": "Unmasked"},
        {"allowPrivilegeEscalation": True},
    )
    first = container_security(p, p.containers[0], 0, "", NODE)
    second = container_security(p, p.containers[1], 0, "", NODE)
    assert first.seccomp == SeccompSpec("Unconfined")
    assert (first.masked_paths, first.readonly_paths) == ((), ())
    assert second.seccomp == SeccompSpec("RuntimeDefault")
    assert not second.no_new_privs


def test_sandbox_security() -> None:
    p = pod(
        {"runAsUser": 1, "runAsGroup": 2, "fsGroup": 3, "supplementalGroups": [4]},
        {},
        {"privileged": True},
    )
    sc = sandbox_security(p)
    assert (sc.run_as_user, sc.run_as_group, sc.supplemental_groups) == (1, 2, (3, 4))
    assert sc.privileged and sc.seccomp == SeccompSpec("RuntimeDefault")
    assert not sandbox_security(pod()).privileged


@pytest.mark.parametrize(
    ("pod_sc", "container_sc", "field"),
    [
        ({"runAsUser": -1}, {}, "spec.securityContext.runAsUser: must be an integer between 0"),
        ({"fsGroup": "x"}, {}, "spec.securityContext.fsGroup"),
        ({"supplementalGroups": [1, -2]}, {}, "spec.securityContext.supplementalGroups[1]"),
        (
            {"seccompProfile": {"type": "Localhost"}},
            {},
            "spec.securityContext.seccompProfile.localhostProfile: required value",
        ),
        (
            {"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p"}},
            {},
            "can only be set when seccomp type is Localhost",
        ),
        (
            {"seccompProfile": {"type": "Strict"}},
            {},
            "spec.securityContext.seccompProfile.type: unsupported value 'Strict'",
        ),
        (
            {"sysctls": [{"name": "Bad Name", "value": "1"}]},
            {},
            "spec.securityContext.sysctls[0].name: invalid value 'Bad Name'",
        ),
        (
            {"sysctls": [{"name": "a.b", "value": "1"}, {"name": "a.b", "value": "2"}]},
            {},
            "spec.securityContext.sysctls[1].name: duplicate value",
        ),
        ({"fsGroupChangePolicy": "Never"}, {}, "spec.securityContext.fsGroupChangePolicy"),
        ({}, {"privileged": "yes"}, "spec.containers[0].securityContext.privileged"),
        ({}, {"procMount": "Masked"}, "spec.containers[0].securityContext.procMount"),
        (
            {},
            {"capabilities": {"add": "NET_ADMIN"}},
            "spec.containers[0].securityContext.capabilities.add: must be a list",
        ),
        (
            {},
            {"privileged": True, "allowPrivilegeEscalation": False},
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        ),
        (
            {},
            {"capabilities": {"add": ["SYS_ADMIN"]}, "allowPrivilegeEscalation": False},
            "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
        ),
    ],
)
def test_security_validation_names_the_field(
    pod_sc: dict[str, Any], container_sc: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidPod) as error:
        pod(pod_sc, container_sc)
    assert field in str(error.value)


def test_cri_messages() -> None:
    """What reaches containerd: namespaces always, the security context, mounts, sysctls."""
    p = pod(
        {"runAsUser": 1000, "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]},
        {"capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
    )
    sandbox = runtimespec.sandbox_spec(p, 0, Path("/var/log/pods"))
    config = cri._sandbox_config(sandbox)
    assert dict(config.linux.sysctls) == {"net.ipv4.tcp_syncookies": "1"}
    sandbox_sc = config.linux.security_context
    assert sandbox_sc.run_as_user.value == 1000
    assert sandbox_sc.seccomp.profile_type == cri.pb.SecurityProfile.RuntimeDefault
    assert sandbox_sc.namespace_options.pid == cri.pb.CONTAINER

    spec = ContainerSpec(
        "c0",
        0,
        "x",
        "c0/0.log",
        mounts=(cri.MountSpec("/data", "/host/data", True, "bidirectional"),),
        security=container_security(p, p.containers[0], 0, "", NODE),
    )
    container = cri._container_config(spec)
    sc = container.linux.security_context
    assert sc.run_as_user.value == 1000 and not sc.HasField("run_as_group")
    assert list(sc.capabilities.drop_capabilities) == ["ALL"]
    assert sc.seccomp.profile_type == cri.pb.SecurityProfile.RuntimeDefault
    assert list(sc.masked_paths) == list(DEFAULT_MASKED_PATHS)
    assert (sc.namespace_options.network, sc.namespace_options.pid) == (
        cri.pb.POD,
        cri.pb.CONTAINER,
    )
    (mount,) = container.mounts
    assert (mount.container_path, mount.host_path, mount.readonly) == ("/data", "/host/data", True)
    assert mount.propagation == cri.pb.PROPAGATION_BIDIRECTIONAL

    host = cri.NamespaceSpec(network=cri.NamespaceMode.NODE)
    plain = cri._container_config(ContainerSpec("c", 0, "x", "l"), host)
    assert plain.linux.security_context.namespace_options.network == cri.pb.NODE
    assert not plain.linux.security_context.HasField("seccomp")
    assert securitycontext.pod_ref(p) == "web_prod(u-1)"
