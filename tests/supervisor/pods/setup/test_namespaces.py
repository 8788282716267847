"""The pod's namespaces without a runtime: hostPID, hostIPC, hostNetwork and
shareProcessNamespace as CRI NamespaceOption, in the sandbox and in every container,
the seam for an ephemeral container's target, and the fields' validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.ipc.runtime import cri
from pkletd.ipc.runtime.cri import NamespaceMode, NamespaceSpec
from pkletd.supervisor.pods.setup import runtimespec
from pkletd.supervisor.pods.setup.namespaces import container_namespaces, pod_namespaces

NODE, POD, CONTAINER, TARGET = (
    NamespaceMode.NODE,
    NamespaceMode.POD,
    NamespaceMode.CONTAINER,
    NamespaceMode.TARGET,
)


def pod(**spec: Any) -> Any:
    return parse_pod(
        {
            "metadata": {"name": "web", "uid": "u-1"},
            "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}]}
            | spec,
        }
    )


@pytest.mark.parametrize(
    ("spec", "network", "pid", "ipc"),
    [
        ({}, POD, CONTAINER, POD),
        ({"hostNetwork": True}, NODE, CONTAINER, POD),
        ({"hostPID": True}, POD, NODE, POD),
        ({"hostIPC": True}, POD, CONTAINER, NODE),
        ({"shareProcessNamespace": True}, POD, POD, POD),
        ({"hostPID": True, "hostIPC": True, "hostNetwork": True}, NODE, NODE, NODE),
        (
            {"hostPID": False, "shareProcessNamespace": False, "hostUsers": True},
            POD,
            CONTAINER,
            POD,
        ),
    ],
)
def test_namespaces_for_pod(
    spec: dict[str, Any], network: NamespaceMode, pid: NamespaceMode, ipc: NamespaceMode
) -> None:
    p = pod(**spec)
    assert pod_namespaces(p) == NamespaceSpec(network, pid, ipc)
    assert container_namespaces(p) == pod_namespaces(p)


def test_a_target_container_only_where_each_container_has_its_own() -> None:
    """The ephemeral container's seam: TARGET with the target's id under the CONTAINER pid
    mode; the pod's mode wins under hostPID and shareProcessNamespace."""
    assert container_namespaces(pod(), "c0ffee") == NamespaceSpec(POD, TARGET, POD, "c0ffee")
    assert container_namespaces(pod(hostIPC=True), "c0ffee").ipc is NODE
    assert container_namespaces(pod(hostPID=True), "c0ffee") == NamespaceSpec(POD, NODE, POD)
    shared = container_namespaces(pod(shareProcessNamespace=True), "c0ffee")
    assert shared == NamespaceSpec(POD, POD, POD)


def test_sandbox_and_every_container_get_the_option() -> None:
    p = pod(hostPID=True, hostIPC=True, hostNetwork=True)
    sandbox = runtimespec.sandbox_spec(p, 0, Path("/var/log/pods"))
    options = cri._sandbox_config(sandbox).linux.security_context.namespace_options
    assert (options.network, options.pid, options.ipc) == (cri.pb.NODE, cri.pb.NODE, cri.pb.NODE)
    for container in p.containers:
        spec = runtimespec.container_spec(p, container, 0)
        config = cri._container_config(spec, cri.sandbox_namespaces(sandbox))
        options = config.linux.security_context.namespace_options
        assert (options.network, options.pid, options.ipc) == (
            cri.pb.NODE,
            cri.pb.NODE,
            cri.pb.NODE,
        )

    shared = pod(shareProcessNamespace=True)
    spec = runtimespec.container_spec(shared, shared.containers[1], 0)
    options = cri._container_config(spec).linux.security_context.namespace_options
    assert (options.network, options.pid, options.ipc) == (cri.pb.POD, cri.pb.POD, cri.pb.POD)


def test_a_target_reaches_the_runtime() -> None:
    ns = NamespaceSpec(pid=TARGET, target_id="c0ffee")
    config = cri._container_config(cri.ContainerSpec("debug", 0, "x", "l", namespaces=ns))
    options = config.linux.security_context.namespace_options
    assert (options.pid, options.target_id) == (cri.pb.TARGET, "c0ffee")


def test_a_sandbox_spec_without_namespaces_keeps_the_defaults() -> None:
    plain = cri.SandboxSpec("p", "default", cri.PodUID("u"), 0, "p", "/tmp/none", True)
    assert cri.sandbox_namespaces(plain) == NamespaceSpec(network=NODE)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"hostPID": "yes"}, "spec.hostPID: must be true or false, got 'yes'"),
        ({"hostIPC": 1}, "spec.hostIPC: must be true or false, got 1"),
        ({"shareProcessNamespace": "true"}, "spec.shareProcessNamespace: must be true or false"),
        ({"hostUsers": "false"}, "spec.hostUsers: must be true or false, got 'false'"),
        (
            {"hostPID": True, "shareProcessNamespace": True},
            "spec.shareProcessNamespace: invalid value true: ShareProcessNamespace and HostPID "
            "cannot both be enabled",
        ),
    ],
)
def test_a_bad_value_names_its_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPod) as error:
        pod(**spec)
    assert str(error.value).startswith(message)
