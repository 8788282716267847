"""Static pod manifests: read, given their kubelet-style identity, or rejected with a reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.manifests import ManifestError, apply_identity, file_origin
from pkletd.workers.filesource import manifest_paths, read_manifest

from tests.workers.source_helpers import WEB_POD_YAML

NODE = "node-a"
YAML = WEB_POD_YAML


def pod(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", **meta},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]},
    }


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def uid(path: Path, node: str = NODE) -> str:
    return str(read_manifest(path, node)["metadata"]["uid"])


def rejection(path: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        read_manifest(path, NODE)
    return str(caught.value)


@pytest.mark.parametrize(("name", "text"), [("web.yaml", YAML), ("web.json", json.dumps(pod()))])
def test_manifest_gets_its_static_pod_identity(tmp_path: Path, name: str, text: str) -> None:
    result = read_manifest(write(tmp_path, name, text), NODE)
    meta = result["metadata"]
    assert (meta["name"], meta["namespace"]) == ("web-node-a", "default")
    assert result["spec"]["nodeName"] == NODE
    assert (result["apiVersion"], result["kind"]) == ("v1", "Pod")
    assert len(meta["uid"]) == 32
    assert meta["annotations"]["kubernetes.io/config.source"] == "file"
    assert meta["annotations"]["kubernetes.io/config.hash"] == meta["uid"]


def test_json_that_yaml_refuses_is_read_as_json(tmp_path: Path) -> None:
    """A character outside the BMP is escaped as a surrogate pair by JSON encoders, which
    YAML's parser refuses; the kubelet reads JSON as JSON. Found by the soak."""
    text = json.dumps(pod(labels={"who": "\U0001f642"}))
    assert "\\ud83d\\ude42" in text
    labels = read_manifest(write(tmp_path, "web.json", text), NODE)["metadata"]["labels"]
    assert labels == {"who": "\U0001f642"}
    flow = "{metadata: {name: web}, spec: {containers: [{name: app, image: nginx}]}}"
    assert read_manifest(write(tmp_path, "flow.yaml", flow), NODE)["spec"]["nodeName"] == NODE


def test_explicit_namespace_and_uid_are_kept(tmp_path: Path) -> None:
    path = write(tmp_path, "web.json", json.dumps(pod(namespace="kube-system", uid="fixed")))
    meta = read_manifest(path, NODE)["metadata"]
    assert (meta["namespace"], meta["uid"], meta["name"]) == ("kube-system", "fixed", "web-node-a")


def test_uid_is_stable_for_the_same_pod_file_and_node(tmp_path: Path) -> None:
    path = write(tmp_path, "web.yaml", YAML)
    first = uid(path)
    assert uid(path) == first
    assert uid(path, "node-b") != first
    assert uid(write(tmp_path, "copy.yaml", YAML)) != first
    assert uid(write(tmp_path, "web.yaml", YAML.replace("1.25", "1.26"))) != first


def test_apply_identity_leaves_its_input_alone() -> None:
    original = pod()
    path = Path("/etc/kubernetes/manifests/web.yaml")
    apply_identity(original, "file", file_origin(path, NODE), NODE)
    assert original == pod()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("metadata: [unclosed", "not valid YAML or JSON"),
        (YAML + "---\n" + YAML, "exactly one Pod per file, found 2 documents"),
        ("", "found 0 documents"),
        ("metadata:\n  name: web\nspec: {}\n", "spec.containers"),
        ("- name: web\n", "must be a mapping"),
        ("metadata:\n  name: Web\nspec: {}\n", "metadata.name"),
    ],
    ids=["invalid-yaml", "two-documents", "empty", "no-containers", "list", "bad-name"],
)
def test_bad_manifest_is_rejected_with_a_reason(tmp_path: Path, text: str, reason: str) -> None:
    assert reason in rejection(write(tmp_path, "bad.yaml", text))


def test_unreadable_manifest_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    assert rejection(path).startswith("cannot read")


def test_invalid_yaml_message_is_one_line(tmp_path: Path) -> None:
    assert "\n" not in rejection(write(tmp_path, "bad.yaml", "a: b: c\n  d"))


def test_manifest_paths_skip_dotfiles_and_directories(tmp_path: Path) -> None:
    for name in ("b.yaml", "a.json", ".b.yaml.swp", ".hidden.yaml"):
        write(tmp_path, name, YAML)
    (tmp_path / "subdir").mkdir()
    assert manifest_paths(tmp_path) == [tmp_path / "a.json", tmp_path / "b.yaml"]


def test_manifest_paths_single_file_and_missing_path(tmp_path: Path) -> None:
    path = write(tmp_path, "web.yaml", YAML)
    assert manifest_paths(path) == [path]
    assert manifest_paths(tmp_path / "missing") == []
