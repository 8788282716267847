"""A static manifest marked deleted (metadata.deletionTimestamp) on the real containerd: its
pod stops at once, the log names the file and why, and ``pkletd status`` shows the manifest
as rejected until it is removed."""

from __future__ import annotations

import pytest

from tests.harness.node import NODE, Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

WHY = (
    f"pod default/web-{NODE}: metadata.deletionTimestamp is set: a static pod marked deleted "
    "is not run (remove the manifest to delete the pod)"
)


def test_a_manifest_marked_deleted_stops_its_pod_and_says_so(pkletd: Pkletd) -> None:
    path = pkletd.put("web", pod_manifest("web"))
    pkletd.start()
    pkletd.wait_running("web")

    marked = pod_manifest("web")
    marked["metadata"]["deletionTimestamp"] = "2026-11-24T10:00:00Z"
    pkletd.put("web", marked)
    wait_for("the pod stopped and gone", lambda: pkletd.pod("web") is None)
    line = f"manifest rejected source=file path={path} reason={WHY}"
    assert line in pkletd.log()

    (shown,) = pkletd.status()["manifests"]
    assert (shown["source"], shown["path"], shown["reason"]) == ("file", str(path), WHY)
    table = pkletd.cli("status").stdout.splitlines()
    assert table[-2].split() == ["MANIFEST", "REJECTED", "REASON"]
    assert table[-1].startswith(str(path)) and table[-1].endswith(WHY)

    pkletd.remove("web")
    wait_for("the rejection gone", lambda: pkletd.status()["manifests"] == [])
    assert f"manifest accepted source=file path={path}" in pkletd.log()
    assert "MANIFEST REJECTED" not in pkletd.cli("status").stdout
