"""Pod defaulting as the v1 scheme defaulters do it, and the QoS class computed on create.

``default_pod`` fills what ``SetDefaults_Pod``/``PodSpec``/``Container``/``Volume``/``Probe``
fill (restartPolicy Always, terminationGracePeriodSeconds 30, dnsPolicy ClusterFirst,
schedulerName default-scheduler, enableServiceLinks, securityContext {}, per container
terminationMessagePath/Policy, imagePullPolicy from the tag, resources {}, ports' protocol,
requests from limits, volume modes 420, probe timings). Admission-time defaults (service
account, priority, default tolerations) live in ``admission.py``.
"""

from __future__ import annotations

from typing import Any

from tests.harness.apiserver import quantities

Obj = dict[str, Any]
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_VOLUME_MODES = ("secret", "configMap", "downwardAPI", "projected")


def default_pod(pod: Obj) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    host_network = bool(spec.get("hostNetwork"))
    for list_name in CONTAINER_LISTS:
        for container in spec.get(list_name) or []:
            default_container(container, host_network)
    for volume in spec.get("volumes") or []:
        default_volume(volume)


def default_container(container: Obj, host_network: bool = False) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = pull_policy(container.get("image", ""))
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if host_network and "hostPort" not in port and "containerPort" in port:
            port["hostPort"] = port["containerPort"]
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None:
            field_ref.setdefault("apiVersion", "v1")
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        if container.get(probe_name) is not None:
            default_probe(container[probe_name])
    for hook in (container.get("lifecycle") or {}).values():
        if isinstance(hook, dict) and hook.get("httpGet") is not None:
            hook["httpGet"].setdefault("scheme", "HTTP")


def pull_policy(image: str) -> str:
    """Always for ``:latest`` or no tag (and no digest), else IfNotPresent."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def default_probe(probe: Obj) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    if probe.get("httpGet") is not None:
        probe["httpGet"].setdefault("path", "/")
        probe["httpGet"].setdefault("scheme", "HTTP")


def default_volume(volume: Obj) -> None:
    sources = [k for k in volume if k != "name"]
    if not sources:
        volume["emptyDir"] = {}
    for kind in _VOLUME_MODES:
        if volume.get(kind) is not None:
            volume[kind].setdefault("defaultMode", 420)
    if volume.get("hostPath") is not None:
        volume["hostPath"].setdefault("type", "")
    for source in (volume.get("projected") or {}).get("sources") or []:
        token = source.get("serviceAccountToken")
        if token is not None:
            token.setdefault("expirationSeconds", 3600)
        for item in (source.get("downwardAPI") or {}).get("items") or []:
            if item.get("fieldRef") is not None:
                item["fieldRef"].setdefault("apiVersion", "v1")
    for item in (volume.get("downwardAPI") or {}).get("items") or []:
        if item.get("fieldRef") is not None:
            item["fieldRef"].setdefault("apiVersion", "v1")


# --------------------------------------------------------------------------- QoS


def qos_class(pod: Obj) -> str:
    """``qos.GetPodQOS``: BestEffort, Burstable or Guaranteed."""
    spec = pod.get("spec") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        own_requests = _compute(resources.get("requests"))
        own_limits = _compute(resources.get("limits"))
        for name, value in own_requests.items():
            requests[name] = requests.get(name, 0) + value
        for name, value in own_limits.items():
            limits[name] = limits.get(name, 0) + value
        if set(own_limits) != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(requests.get(k) == limits.get(k) for k in ("cpu", "memory")):
        return "Guaranteed"
    return "Burstable"


def _compute(resources: dict[str, str] | None) -> dict[str, Any]:
    """The cpu/memory entries with a non-zero quantity."""
    out: dict[str, Any] = {}
    for name in ("cpu", "memory"):
        if resources and name in resources:
            value = quantities.parse(resources[name])
            if value != 0:
                out[name] = value
    return out
