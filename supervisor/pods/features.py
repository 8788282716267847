"""What a pod may ask for that this node cannot give: admission refuses it, never runs it without.

Each check returns the refusal's reason and message, else None; ``admission`` runs them
in the kubelet's order:

- ``supplemental_groups_policy`` (the predicate admit handler): ``Strict`` needs a
  runtime that reports the feature, which containerd 1.6 does not
  (``SupplementalGroupsPolicyNotSupported``, the kubelet's message);
- ``unsupported`` (the pod-features handler, last before node shutdown): pod-level
  ``resources`` (``PodLevelResourcesNotSupported``, the kubelet's message with its
  feature gate off, which is what pkletd is); ``hostUsers: false``: pkletd allocates
  no user namespaces and containerd 1.6 has none through the CRI, so the pod is
  refused with the kubelet's message for such a runtime (the kubelet itself retries
  the sandbox forever with ``FailedCreatePodSandBox``); ``resourceClaims`` (dynamic
  resource allocation, no driver here); hugepages (a ``hugepages-<size>`` request or
  limit, an emptyDir of medium ``HugePages``: pkletd mounts no hugetlbfs and sets no
  hugetlb limit). These three with ``PodFeatureUnsupported``.
"""

from __future__ import annotations

from pkletd.ipc.apimodel.podspec import Pod
from pkletd.supervisor.pods.events import Reason

Refusal = tuple[Reason, str]

USER_NAMESPACES = "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
RESOURCE_CLAIMS = "spec.resourceClaims: pkletd does not serve dynamic resource allocation"
POD_LEVEL_RESOURCES = "PodLevelResources feature gate is disabled"
STRICT_GROUPS = "SupplementalGroupsPolicy=Strict is not supported in this node"


def supplemental_groups_policy(pod: Pod) -> Refusal | None:
    if pod.security is not None and pod.security.supplemental_groups_policy == "Strict":
        return Reason.SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED, STRICT_GROUPS
    return None


def unsupported(pod: Pod) -> Refusal | None:
    spec = pod.raw.get("spec") or {}
    resources = spec.get("resources") or {}
    if resources.get("requests") or resources.get("limits"):
        return Reason.POD_LEVEL_RESOURCES_NOT_SUPPORTED, POD_LEVEL_RESOURCES
    if pod.namespaces.host_users is False:
        return Reason.POD_FEATURE_UNSUPPORTED, USER_NAMESPACES
    if spec.get("resourceClaims"):
        return Reason.POD_FEATURE_UNSUPPORTED, RESOURCE_CLAIMS
    hugepages = _hugepages(pod)
    if hugepages is not None:
        return Reason.POD_FEATURE_UNSUPPORTED, f"pkletd does not serve hugepages: {hugepages}"
    return None


def _hugepages(pod: Pod) -> str | None:
    for volume in pod.volumes:
        if volume.kind == "emptyDir" and volume.medium.startswith("HugePages"):
            return f'volume "{volume.name}" has medium {volume.medium}'
    for container in pod.init_containers + pod.containers:
        amounts = container.resources.requests + container.resources.limits
        asked = sorted({name for name, n in amounts if name.startswith("hugepages-") and n > 0})
        if asked:
            return f'container "{container.name}" asks for {", ".join(asked)}'
    return None
