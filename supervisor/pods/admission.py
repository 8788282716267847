"""Admission: may this pod run on this node? The kubelet's canAdmitPod for static pods.

Checks, in the kubelet's order, and the first failure is the reason:

-. pkletd's own, before any: a pod that ``parse_pod`` refused (an unknown value, a
   value of the wrong type; ``podspec.refused_pod``) is refused with ``InvalidPodSpec``
   and the field's path and the reason as the message;
-. the eviction manager's admit handler, first in the kubelet's chain: under a pressure
   condition (``Admitter.pressure``, from the eviction worker) a critical pod is
   admitted, and under memory pressure alone a pod that is not BestEffort or tolerates
   the ``node.kubernetes.io/memory-pressure:NoSchedule`` taint; any other is refused
   (``Evicted``, ``The node had condition: [MemoryPressure]. ``);
0. the sysctl allowlist, the kubelet's own admit handler that runs before the
   predicates (``SysctlForbidden``, ``sysctls``: the safe ones and
   ``allowedUnsafeSysctls``, none of the host's network or IPC namespace it shares);
0. on a standalone node (no API server), a pod with a ``runtimeClassName``: there is no
   RuntimeClass to resolve it by (``RuntimeClassUnavailable``; the kubelet would run it
   with the runtime's default handler, as if the field were not there);
1. ``supplementalGroupsPolicy: Strict`` (``SupplementalGroupsPolicyNotSupported``,
   ``features``); ``kubernetes.io/os`` node selector and ``spec.os.name`` against linux
   (``PodOSSelectorNodeLabelDoesNotMatch``, ``PodOSNotSupported``);
2. resources (the scheduler's AdmissionCheck): pod count against ``maxPods``, then
   cpu, memory and ephemeral-storage requests against allocatable, counting the
   admitted pods that have not finished (``OutOfpods``, ``OutOfcpu``,
   ``OutOfmemory``, ``OutOfephemeral-storage``, with the kubelet's "Node didn't have
   enough resource" message);
3. node affinity and ``nodeSelector`` against the node's labels (``NodeAffinity``),
   ``spec.nodeName`` (``NodeName``), host ports already taken (``NodePorts``);
4. AppArmor: a profile on a host without AppArmor (``AppArmor``, ``apparmor``);
5. what pkletd cannot give (``features``): pod-level resources, ``hostUsers: false``,
   ``resourceClaims`` (``PodLevelResourcesNotSupported``, ``PodFeatureUnsupported``);
6. last, as the kubelet's node shutdown manager is the last admit handler: while the
   node shuts down, every pod (``Admitter.refusal``, ``NodeShutdown``).

Static pods are exempt from the NoExecute taint check, and pkletd has no taints.
A rejected pod is Failed with that reason and message, and never runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.podenums import RestartPolicy
from pkletd.ipc.apimodel.podspec import Pod
from pkletd.supervisor.pods import features, sysctls
from pkletd.supervisor.pods.cgroups import qos
from pkletd.supervisor.pods.events import Reason
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.setup import apparmor

RESOURCES = ("cpu", "memory", "ephemeral-storage")
MEMORY_PRESSURE = "MemoryPressure"
MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure"
WILDCARD = "0.0.0.0"
PORTS_TAKEN = "node(s) didn't have free ports for the requested pod ports"


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    max_pods: int
    allocatable: dict[str, int]  # cpu in millicores, memory and ephemeral-storage in bytes
    labels: dict[str, str] = field(default_factory=dict)  # the Node's, as it registers
    allowed_sysctls: sysctls.Allowlist = field(default_factory=sysctls.Allowlist)
    apparmor: bool = False  # the host enforces AppArmor (``apparmor.host_enabled``)

    @classmethod
    def of(
        cls,
        info: NodeInfo,
        max_pods: int,
        labels: dict[str, str],
        allowed: sysctls.Allowlist,
        apparmor_enabled: bool,
    ) -> Node:
        allocatable = {
            "cpu": quantity.milli(info.cpu),
            "memory": quantity.ceil_int(info.memory),
            "ephemeral-storage": quantity.ceil_int(info.ephemeral_storage),
        }
        return cls(info.name, max_pods, allocatable, labels, allowed, apparmor_enabled)


def requests(pod: Pod) -> dict[str, int]:
    """The pod's effective requests: the larger of its app containers (with sidecars)
    and any one init container (with the sidecars started before it), plus its overhead."""
    total = dict.fromkeys(RESOURCES, 0)
    sidecars = dict.fromkeys(RESOURCES, 0)
    init_peak = dict.fromkeys(RESOURCES, 0)
    spec = pod.raw.get("spec", {})
    for raw in spec.get("initContainers") or []:
        own = _container_requests(raw)
        if raw.get("restartPolicy") == RestartPolicy.ALWAYS:
            sidecars = {k: sidecars[k] + own[k] for k in RESOURCES}
        else:
            init_peak = {k: max(init_peak[k], sidecars[k] + own[k]) for k in RESOURCES}
    for raw in spec.get("containers") or []:
        own = _container_requests(raw)
        total = {k: total[k] + own[k] for k in RESOURCES}
    extra = dict(pod.overhead)
    overhead = {k: _whole(k, extra.get(k, Fraction(0))) for k in RESOURCES}
    return {k: max(total[k] + sidecars[k], init_peak[k]) + overhead[k] for k in RESOURCES}


def _container_requests(container: dict[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    # A limit without a request is the request, as the API defaults it.
    wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: _whole(name, quantity.parse(wanted.get(name, 0))) for name in RESOURCES}


def _whole(name: str, value: Fraction) -> int:
    """cpu in millicores, the others in whole units."""
    return quantity.milli(value) if name == "cpu" else quantity.ceil_int(value)


RequestsOf = Callable[[Pod], dict[str, int]]


class Admitter:
    """Admission on one node, remembering each pod's requests (parsed once per spec)."""

    def __init__(self, node: Node, standalone: bool = False) -> None:
        self.node = node
        self.standalone = standalone  # no API server: no RuntimeClasses
        self.refusal: Rejection | None = None  # every new pod's, while the node shuts down
        self.pressure: tuple[str, ...] = ()  # the node's pressure conditions in force
        self._memo: dict[str, tuple[dict[str, Any], dict[str, int]]] = {}

    def requests(self, pod: Pod) -> dict[str, int]:
        hit = self._memo.get(pod.uid)
        if hit is not None and hit[0] is pod.raw:
            return hit[1]
        value = requests(pod)
        self._memo[pod.uid] = (pod.raw, value)
        return value

    def admit(self, pod: Pod, active: Iterable[Pod]) -> Rejection | None:
        return (
            _invalid(pod)
            or under_pressure(pod, self.pressure)
            or (_runtime_class(pod) if self.standalone else None)
            or admit(pod, active, self.node, self.requests)
            or self.refusal
        )

    def forget(self, uid: str) -> None:
        self._memo.pop(uid, None)


def admit(
    pod: Pod, active: Iterable[Pod], node: Node, requests_of: RequestsOf = requests
) -> Rejection | None:
    others = [p for p in active if p.uid != pod.uid]
    return (
        _invalid(pod)
        or _sysctls(pod, node)
        or _refused(features.supplemental_groups_policy(pod))
        or _os(pod)
        or _resources(pod, others, node, requests_of)
        or _affinity(pod, node)
        or _node_name(pod, node)
        or _ports(pod, others)
        or _apparmor(pod, node)
        or _refused(features.unsupported(pod))
    )


def under_pressure(pod: Pod, conditions: tuple[str, ...]) -> Rejection | None:
    """The eviction manager's admit handler, over the pressure conditions in force."""
    if not conditions or qos.critical(pod):
        return None
    if conditions == (MEMORY_PRESSURE,):
        best_effort = qos.pod_qos(pod) == qos.BEST_EFFORT
        if not best_effort or tolerates(pod, MEMORY_PRESSURE_TAINT, "NoSchedule"):
            return None
    return Rejection(Reason.EVICTED, f"The node had condition: [{' '.join(conditions)}]. ")


def tolerates(pod: Pod, key: str, effect: str, value: str = "") -> bool:
    """Whether one of the pod's tolerations tolerates the taint (``ToleratesTaint``)."""
    for toleration in pod.raw.get("spec", {}).get("tolerations") or []:
        if toleration.get("effect") and toleration["effect"] != effect:
            continue
        if toleration.get("key") and toleration["key"] != key:
            continue
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists" or (operator == "Equal" and toleration.get("value", "") == value):
            return True
    return False


def _runtime_class(pod: Pod) -> Rejection | None:
    """A standalone node has no RuntimeClass to resolve ``runtimeClassName`` by."""
    if not pod.runtime_class:
        return None
    return Rejection(
        Reason.RUNTIME_CLASS_UNAVAILABLE,
        f'runtimeClassName "{pod.runtime_class}" cannot be resolved: the node runs standalone, '
        "with no API server to read RuntimeClasses from",
    )


def _invalid(pod: Pod) -> Rejection | None:
    return Rejection(Reason.INVALID_POD_SPEC, pod.invalid) if pod.invalid else None


def _sysctls(pod: Pod, node: Node) -> Rejection | None:
    """The kubelet's sysctl allowlist: an admit handler that runs before the predicates."""
    message = sysctls.forbidden(pod, node.allowed_sysctls)
    return Rejection(Reason.SYSCTL_FORBIDDEN, message) if message is not None else None


def _apparmor(pod: Pod, node: Node) -> Rejection | None:
    message = apparmor.refusal(pod, node.apparmor)
    return Rejection(Reason.APPARMOR, message) if message is not None else None


def _refused(found: features.Refusal | None) -> Rejection | None:
    return Rejection(*found) if found is not None else None


def _os(pod: Pod) -> Rejection | None:
    if pod.labels.get("kubernetes.io/os", "linux") != "linux":
        return Rejection(
            Reason.POD_OS_SELECTOR_MISMATCH,
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        )
    os_name = (pod.raw.get("spec", {}).get("os") or {}).get("name")
    if os_name not in (None, "linux"):
        return Rejection(
            Reason.POD_OS_NOT_SUPPORTED, "Failed to admit pod as the OS field doesn't match node OS"
        )
    return None


def _resources(
    pod: Pod, others: list[Pod], node: Node, requests_of: RequestsOf
) -> Rejection | None:
    if len(others) + 1 > node.max_pods:
        return _insufficient("pods", 1, len(others), node.max_pods)
    wanted = requests_of(pod)
    taken = [requests_of(p) for p in others]
    for name in RESOURCES:
        used = sum(t[name] for t in taken)
        capacity = node.allocatable[name]
        if wanted[name] and used + wanted[name] > capacity:
            return _insufficient(name, wanted[name], used, capacity)
    return None


def _insufficient(name: str, requested: int, used: int, capacity: int) -> Rejection:
    return Rejection(
        Reason(f"OutOf{name}"),
        f"Node didn't have enough resource: {name}, requested: {requested}, "
        f"used: {used}, capacity: {capacity}",
    )


def _affinity(pod: Pod, node: Node) -> Rejection | None:
    spec = pod.raw.get("spec", {})
    labels = node.labels
    selector = spec.get("nodeSelector") or {}
    ok = all(labels.get(k) == v for k, v in selector.items())
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if ok and terms:
        ok = any(_term_matches(term, labels, node.name) for term in terms)
    if ok:
        return None
    return Rejection(
        Reason.NODE_AFFINITY,
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
    )


def _term_matches(term: dict[str, Any], labels: dict[str, str], name: str) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    checks = [_expression(e, labels) for e in expressions]
    checks += [_expression(f, {"metadata.name": name}) for f in fields]
    return all(checks)


def _expression(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator", "")
    values = [str(v) for v in expression.get("values") or []]
    value = labels.get(key)
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = Fraction(int(value)), Fraction(int(values[0]))
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def _node_name(pod: Pod, node: Node) -> Rejection | None:
    wanted = pod.raw.get("spec", {}).get("nodeName")
    if wanted and wanted != node.name:
        return Rejection(
            Reason.NODE_NAME,
            "Predicate NodeName failed: node(s) didn't match the requested node name",
        )
    return None


def _ports(pod: Pod, others: list[Pod]) -> Rejection | None:
    taken = [port for other in others for port in _host_ports(other)]
    if any(_clash(mine, theirs) for mine in _host_ports(pod) for theirs in taken):
        return Rejection(Reason.NODE_PORTS, f"Predicate NodePorts failed: {PORTS_TAKEN}")
    return None


def _clash(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    """Same protocol and port, and the same address or a wildcard on either side."""
    same_port = a[0] == b[0] and a[2] == b[2]
    return same_port and (a[1] == b[1] or WILDCARD in (a[1], b[1]))


def _host_ports(pod: Pod) -> list[tuple[str, str, int]]:
    found = []
    for container in pod.raw.get("spec", {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                ip = port.get("hostIP") or WILDCARD
                found.append((port.get("protocol", "TCP"), ip, int(port["hostPort"])))
    return found
