"""The kubelet API's reviews on a bootstrapping node, against the real control plane:
unavailable (saying why) until the kubeconfig is written, then asked with it, and with the
new credentials once they change (kube-apiserver's audit log shows who asked)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pkletd.workers.http.followreviewer import FollowingReviewer
from pkletd.workers.http.reviews import ReviewUnavailable

from tests.harness.controlplane import ControlPlane
from tests.harness.node import wait_for

pytestmark = pytest.mark.slow


def reviews_by(plane: ControlPlane, user: str) -> int:
    return len(plane.audit_events("tokenreviews", user=user, verb="create"))


def test_reviews_wait_for_the_kubeconfig_and_follow_it(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubelet.conf"
    reviewer = FollowingReviewer(str(kubeconfig), str(tmp_path / "pki"), 5, 10)
    first, second = "system:node:review-n1", "system:node:review-n2"
    before = {user: reviews_by(control_plane, user) for user in (first, second)}
    try:
        with pytest.raises(ReviewUnavailable, match="not there yet"):
            reviewer.token_review("nothing")
        control_plane.kubeconfig(path=kubeconfig, user=first, groups=["system:nodes"])
        assert reviewer.token_review("nothing").get("authenticated") is not True
        wait_for("a review as n1", lambda: reviews_by(control_plane, first) > before[first])
        control_plane.kubeconfig(path=kubeconfig, user=second, groups=["system:nodes"])
        later = os.stat(kubeconfig).st_mtime_ns + 10**9
        os.utime(kubeconfig, ns=(later, later))
        reviewer.token_review("nothing")
        wait_for("a review as n2", lambda: reviews_by(control_plane, second) > before[second])
    finally:
        reviewer.close()
