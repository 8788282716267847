"""The kubelet API's reviews on a bootstrapping node: unavailable (saying why) until the
kubeconfig is written, then asked with it, and with the new credentials once they change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pkletd.workers.http.followreviewer import FollowingReviewer
from pkletd.workers.http.reviews import ReviewUnavailable

from tests.harness.apiserver import ApiServer


def test_reviews_wait_for_the_kubeconfig_and_follow_it(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubelet.conf"
    reviewer = FollowingReviewer(str(kubeconfig), str(tmp_path / "pki"), 5, 10)
    try:
        with pytest.raises(ReviewUnavailable, match="not there yet"):
            reviewer.token_review("nothing")
        apiserver.kubeconfig(path=kubeconfig, user="system:node:n1", groups=["system:nodes"])
        assert reviewer.token_review("nothing").get("authenticated") is not True
        assert apiserver.requests(user="system:node:n1", resource="tokenreviews")
        apiserver.kubeconfig(path=kubeconfig, user="system:node:n2", groups=["system:nodes"])
        later = os.stat(kubeconfig).st_mtime_ns + 10**9
        os.utime(kubeconfig, ns=(later, later))
        reviewer.token_review("nothing")
        assert apiserver.requests(user="system:node:n2", resource="tokenreviews")
    finally:
        reviewer.close()
