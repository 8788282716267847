"""Labels and taints as the API validates them, and the node labels a kubelet may set.

``qualified_name`` and ``label_value`` are the API's syntax rules (a DNS-1123
subdomain prefix of at most 253 characters, a name of at most 63; values of at most
63). ``parse_labels`` and ``parse_taints`` read the kubelet's flag forms
(``k=v,k2=v2`` and ``k=v:NoSchedule,k2:NoExecute``); ``node_label_allowed`` is the
NodeRestriction rule the kubelet applies to ``--node-labels`` before registering.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Labels in the kubernetes.io and k8s.io namespaces a kubelet may set on its own Node.
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
    }
)
KUBELET_LABEL_DOMAINS = ("kubelet.kubernetes.io", "node.kubernetes.io")


class InvalidLabel(ValueError):
    """A label or taint the API server would refuse; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def as_api(self) -> dict[str, str]:
        found = {"key": self.key, "effect": self.effect}
        if self.value:
            found["value"] = self.value
        return found


def qualified_name(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        raise InvalidLabel(f"{key!r}: the prefix must be a DNS subdomain")
    if len(name) > 63 or not _NAME.match(name):
        raise InvalidLabel(
            f"{key!r}: the name must be 63 characters or less, alphanumerics with '-', '_' "
            "or '.' inside"
        )
    return key


def label_value(value: str) -> str:
    if value and (len(value) > 63 or not _NAME.match(value)):
        raise InvalidLabel(
            f"{value!r}: a label value must be 63 characters or less, alphanumerics with "
            "'-', '_' or '.' inside"
        )
    return value


def parse_labels(text: str) -> tuple[tuple[str, str], ...]:
    """``k=v,k2=v2`` (the kubelet's --node-labels) as pairs, each checked."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, equals, value = item.partition("=")
        if not equals:
            raise InvalidLabel(f"{item!r}: want key=value")
        pairs.append((qualified_name(key), label_value(value)))
    return tuple(pairs)


def parse_taint(text: str) -> Taint:
    """``key[=value]:Effect``, as --register-with-taints takes each taint."""
    spec, colon, effect = text.rpartition(":")
    if not colon or effect not in TAINT_EFFECTS:
        raise InvalidLabel(f"{text!r}: want key[=value]:effect, effect one of {TAINT_EFFECTS}")
    key, _, value = spec.partition("=")
    return Taint(qualified_name(key), label_value(value), effect)


def node_label_allowed(key: str) -> bool:
    """May a kubelet set this label on its Node (NodeRestriction)?"""
    prefix = key.rpartition("/")[0]
    restricted = prefix.endswith("kubernetes.io") or prefix.endswith("k8s.io")
    if not restricted or key in KUBELET_LABELS:
        return True
    return any(prefix == d or prefix.endswith("." + d) for d in KUBELET_LABEL_DOMAINS)
