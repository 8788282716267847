"""The patch formats of the test API server, checked on plain objects (no server):
strategic merge patch keys and directives, RFC 7386 merge patch, RFC 6902 JSON patch,
and the decoding rules (unknown fields, zero values, times, quantities)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.apiserver import quantities, schema
from tests.harness.apiserver.patch import PatchFailed, json_patch, merge_patch
from tests.harness.apiserver.strategic import MergeKeyMissing, strategic_merge


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "a", "image": "x:1", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                {"name": "b", "image": "y:1"},
            ],
            **spec,
        },
    }


def test_containers_merge_by_name_and_ports_by_container_port() -> None:
    out = strategic_merge(
        pod(),
        {
            "spec": {
                "containers": [
                    {"name": "a", "ports": [{"containerPort": 81}]},
                    {"name": "c", "image": "z"},
                ]
            }
        },
        "V1Pod",
    )
    containers = out["spec"]["containers"]
    assert [c["name"] for c in containers] == ["a", "b", "c"]
    assert [p["containerPort"] for p in containers[0]["ports"]] == [80, 81]
    assert containers[0]["image"] == "x:1"


def test_list_directives() -> None:
    deleted = strategic_merge(
        pod(), {"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}, "V1Pod"
    )
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["a"]
    replaced = strategic_merge(
        pod(),
        {"spec": {"containers": [{"name": "z", "image": "q"}, {"$patch": "replace"}]}},
        "V1Pod",
    )
    assert replaced["spec"]["containers"] == [{"name": "z", "image": "q"}]
    ordered = strategic_merge(
        pod(),
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                "containers": [{"name": "a", "image": "x:2"}],
            }
        },
        "V1Pod",
    )
    assert [(c["name"], c["image"]) for c in ordered["spec"]["containers"]] == [
        ("b", "y:1"),
        ("a", "x:2"),
    ]


def test_map_directives_and_retain_keys() -> None:
    replaced = strategic_merge(
        pod(nodeSelector={"a": "1", "b": "2"}),
        {"spec": {"nodeSelector": {"$patch": "replace", "c": "3"}}},
        "V1Pod",
    )
    assert replaced["spec"]["nodeSelector"] == {"c": "3"}
    gone = strategic_merge(
        pod(nodeSelector={"a": "1"}), {"spec": {"nodeSelector": {"$patch": "delete"}}}, "V1Pod"
    )
    assert "nodeSelector" not in gone["spec"]
    volumes = pod(volumes=[{"name": "v", "emptyDir": {}}])
    retained = strategic_merge(
        volumes,
        {
            "spec": {
                "volumes": [
                    {"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}
                ]
            }
        },
        "V1Pod",
    )
    assert retained["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]


def test_status_conditions_and_node_addresses_merge_by_type() -> None:
    node = {
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "n1"},
            ],
            "conditions": [{"type": "Ready", "status": "True"}],
            "images": [{"names": ["a"]}],
        }
    }
    out = strategic_merge(
        node,
        {
            "status": {
                "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
                "conditions": [{"type": "DiskPressure", "status": "False"}],
                "images": [{"names": ["b"]}],
            }
        },
        "V1Node",
    )
    assert out["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.2"},
        {"type": "Hostname", "address": "n1"},
    ]
    assert [c["type"] for c in out["status"]["conditions"]] == ["Ready", "DiskPressure"]
    assert out["status"]["images"] == [{"names": ["b"]}]  # no merge key: replaced


def test_lists_without_a_merge_key_are_replaced_and_missing_keys_fail() -> None:
    tolerated = strategic_merge(
        pod(tolerations=[{"key": "a", "operator": "Exists"}]),
        {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}},
        "V1Pod",
    )
    assert tolerated["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]
    with pytest.raises(MergeKeyMissing, match="does not contain declared merge key: name"):
        strategic_merge(pod(), {"spec": {"containers": [{"image": "q"}]}}, "V1Pod")


def test_merge_patch_and_json_patch() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None}, "l": [2]}) == {
        "a": {"c": 2},
        "l": [2],
    }
    doc = {"a": [1, 2], "b": {"c": "d"}}
    assert json_patch(
        doc,
        [
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "move", "from": "/b/c", "path": "/e"},
            {"op": "test", "path": "/e", "value": "d"},
        ],
    ) == {"a": [1, 2, 3], "b": {}, "e": "d"}
    with pytest.raises(PatchFailed):
        json_patch(doc, [{"op": "remove", "path": "/missing"}])


def test_decoding_drops_unknown_fields_and_normalises() -> None:
    body, unknown = schema.decode(
        {
            "metadata": {"name": "n", "labels": {}, "extra": 1},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "1024Mi"}}}]},
            "status": {"startTime": "2024-05-06T07:08:09.123+02:00"},
        },
        "V1Pod",
    )
    assert unknown == ["metadata.extra"]
    assert body["metadata"] == {"name": "n"}
    assert body["spec"]["containers"][0]["resources"]["limits"]["memory"] == "1Gi"
    assert body["status"]["startTime"] == "2024-05-06T05:08:09Z"
    event, _ = schema.decode({"metadata": {"name": "e"}, "involvedObject": {}}, "CoreV1Event")
    assert event["eventTime"] is None and event["firstTimestamp"] is None


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0.1", "100m"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("0.5Ki", "512"),
        ("1e3", "1e3"),
        ("250m", "250m"),
    ],
)
def test_quantities_print_canonically(text: str, canonical: str) -> None:
    assert quantities.canonical(text) == canonical
