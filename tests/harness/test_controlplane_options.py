"""The control plane's Options become the flags they name, and nothing else changes."""

from __future__ import annotations

from pathlib import Path

from tests.harness.controlplane import ControlPlane, Options
from tests.harness.controlplane.cluster import Wanted


def argv(plane: ControlPlane, component: str) -> list[str]:
    return plane.components[component].argv


def test_the_defaults_are_kubeadms(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path)
    apiserver = argv(plane, "kube-apiserver")
    assert not [a for a in apiserver if a.startswith(("--kubelet-certificate-authority",
                                                      "--watch-cache"))]  # fmt: skip
    assert f"--audit-log-path={plane.audit_log_path}" in apiserver
    assert not [a for a in argv(plane, "kube-controller-manager") if "signing-duration" in a]


def test_each_option_is_its_flag(tmp_path: Path) -> None:
    options = Options(signing_duration_s=90, verify_kubelet_serving=True, watch_cache=False)
    plane = ControlPlane(tmp_path, options)
    apiserver = argv(plane, "kube-apiserver")
    assert f"--kubelet-certificate-authority={plane.ca_path}" in apiserver
    assert "--watch-cache=false" in apiserver
    assert "--cluster-signing-duration=90s" in argv(plane, "kube-controller-manager")


def test_audit_events_are_picked_by_resource_user_and_verb() -> None:
    event = {
        "stage": "ResponseComplete",
        "verb": "get",
        "user": {"username": "admin"},
        "objectRef": {"resource": "pods", "subresource": "exec"},
    }
    assert Wanted("pods", "exec", "admin", "get").matches(event)
    assert Wanted("pods", None, None, None).matches(event)
    assert not Wanted("pods", "attach", None, None).matches(event)
    assert not Wanted("pods", None, "bob", None).matches(event)
    assert not Wanted("pods", None, None, "create").matches(event)
    assert not Wanted("pods", None, None, None).matches({**event, "stage": "ResponseStarted"})
