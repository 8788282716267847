"""A pod's priority, as the kubelet compares pods by it.

The kubelet reads ``spec.priority``, which the API server's Priority admission fills in
from ``spec.priorityClassName``. A static pod never passes that admission, so its
``priority`` is whatever its manifest says; for one that names a built-in system class
and gives no number, pkletd resolves the class as the admission would (the kubelet
leaves it 0). Other classes are cluster objects the node does not read: such a pod
without a number counts as 0, as under the kubelet.

``critical`` is the kubelet's ``IsCriticalPod``: a static pod (a config source other
than the API), a mirror pod, or a priority of ``system-cluster-critical`` and above.
Such a pod is admitted under pressure and never evicted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pkletd.ipc.apimodel.fieldcheck import InvalidField

# scheduling.SystemCriticalPriority: the lowest priority of the built-in system classes.
SYSTEM_CRITICAL = 2_000_000_000
SYSTEM_CLASSES = {
    "system-cluster-critical": SYSTEM_CRITICAL,
    "system-node-critical": SYSTEM_CRITICAL + 1000,
}
INT32 = (-(2**31), 2**31 - 1)
SOURCE_ANNOTATION = "kubernetes.io/config.source"  # file, http or api
API_SOURCE = "api"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def pod_priority(spec: dict[str, Any]) -> int:
    """``spec.priority``, else the built-in class's value, else 0."""
    value = spec.get("priority")
    if value is None:
        return SYSTEM_CLASSES.get(str(spec.get("priorityClassName") or ""), 0)
    if isinstance(value, bool) or not isinstance(value, int) or not INT32[0] <= value <= INT32[1]:
        raise InvalidField(f"spec.priority: must be a 32-bit integer, got {value!r}")
    return value


def critical(annotations: Mapping[str, str], priority: int) -> bool:
    """``IsCriticalPod``, from the pod's annotations and its priority."""
    source = annotations.get(SOURCE_ANNOTATION)
    static = source is not None and source != API_SOURCE
    return static or MIRROR_ANNOTATION in annotations or priority >= SYSTEM_CRITICAL
