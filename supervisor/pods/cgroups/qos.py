"""A pod's QoS class and its containers' OOM score adjustment, as the kubelet computes them.

``pod_qos`` is the API's ``GetPodQOS`` (``pkg/apis/core/v1/helper/qos``): over the
regular and the init containers, only cpu and memory count, and only amounts
above zero. No request and no limit anywhere: ``BestEffort``. Every container
limiting both cpu and memory, and the summed requests equal to the summed limits
(compared as quantities: ``1`` equals ``1000m``): ``Guaranteed``. Otherwise
``Burstable``. Requests are the defaulted ones (a lone limit is the request).

``oom_score_adj`` is the kubelet's ``GetContainerOOMScoreAdjust``
(``pkg/kubelet/qos/policy.go``): -997 for a node-critical pod (a static pod, as
all of pkletd's are, with ``priorityClassName: system-node-critical``) and for
Guaranteed, 1000 for BestEffort, and for Burstable ``1000 - 1000 * memory request
/ machine memory`` (integer division), a sidecar never above the regular
container with the least memory request, then kept within 3 (``1000 - 997``) and
999.
"""

from __future__ import annotations

from fractions import Fraction

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.apimodel.priority import SYSTEM_CRITICAL

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

COMPUTE = ("cpu", "memory")  # supportedQoSComputeResources
GUARANTEED_OOM_SCORE_ADJ = -997
BEST_EFFORT_OOM_SCORE_ADJ = 1000
SYSTEM_NODE_CRITICAL = "system-node-critical"
SOURCE_ANNOTATION = "kubernetes.io/config.source"  # file, http or api
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def pod_qos(pod: Pod) -> str:
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in pod.containers + pod.init_containers:
        for name, amount in container.resources.requests:
            if name in COMPUTE and amount > 0:
                requests[name] = requests.get(name, Fraction(0)) + amount
        found = set()
        for name, amount in container.resources.limits:
            if name in COMPUTE and amount > 0:
                found.add(name)
                limits[name] = limits.get(name, Fraction(0)) + amount
        if not found >= set(COMPUTE):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and all(limits.get(name) == amount for name, amount in requests.items()):
        if len(requests) == len(limits):
            return GUARANTEED
    return BURSTABLE


def critical(pod: Pod) -> bool:
    """The kubelet's ``IsCriticalPod``: a static pod (a source other than the API), a
    mirror pod, or a priority of ``system-cluster-critical`` and above. Admitted under
    pressure, never evicted."""
    source = pod.annotations.get(SOURCE_ANNOTATION)
    static = source is not None and source != PodSource.API
    return static or MIRROR_ANNOTATION in pod.annotations or pod.priority >= SYSTEM_CRITICAL


def node_critical(pod: Pod) -> bool:
    """``IsNodeCriticalPod``: critical (every static pod is) and system-node-critical."""
    return bool(pod.raw.get("spec", {}).get("priorityClassName") == SYSTEM_NODE_CRITICAL)


def oom_score_adj(pod: Pod, container: Container, memory_capacity: int) -> int:
    if node_critical(pod):
        return GUARANTEED_OOM_SCORE_ADJ
    klass = pod_qos(pod)
    if klass == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if klass == BEST_EFFORT:
        return BEST_EFFORT_OOM_SCORE_ADJ
    capacity = max(memory_capacity, 1)
    adjust = 1000 - (1000 * _memory_request(container)) // capacity
    if container.sidecar and any(c is container for c in pod.init_containers):
        least = min(_memory_request(c) for c in pod.containers)
        adjust = min(adjust, 1000 - (1000 * least) // capacity)
    if adjust < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adjust == BEST_EFFORT_OOM_SCORE_ADJ:
        return adjust - 1
    return adjust


def _memory_request(container: Container) -> int:
    request = container.resources.request("memory")
    return quantity.ceil_int(request) if request is not None else 0
