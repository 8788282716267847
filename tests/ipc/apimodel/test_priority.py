"""A pod's priority: its number, else a built-in system class's, else 0."""

from __future__ import annotations

import pytest
from pkletd.ipc.apimodel.fieldcheck import InvalidField
from pkletd.ipc.apimodel.priority import SYSTEM_CRITICAL, pod_priority


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, 0),
        ({"priority": -5}, -5),
        ({"priority": 7, "priorityClassName": "system-node-critical"}, 7),
        ({"priorityClassName": "system-cluster-critical"}, SYSTEM_CRITICAL),
        ({"priorityClassName": "system-node-critical"}, SYSTEM_CRITICAL + 1000),
        ({"priorityClassName": "high"}, 0),  # a cluster's class: the node cannot read it
    ],
)
def test_priority(spec: dict[str, object], expected: int) -> None:
    assert pod_priority(spec) == expected


@pytest.mark.parametrize("value", ["high", 1.5, True, 2**31])
def test_a_priority_that_is_no_int32_names_the_field(value: object) -> None:
    with pytest.raises(InvalidField, match=r"spec\.priority: must be a 32-bit integer"):
        pod_priority({"priority": value})
