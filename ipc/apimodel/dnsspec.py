"""A pod's DNS and host names: ``dnsPolicy``, ``dnsConfig``, ``hostname``, ``subdomain``,
``setHostnameAsFQDN`` and ``hostAliases``, checked as the API server checks them.

Only parsing and validation (``ValidatePodSpec``'s ``validateDNSPolicy``,
``validatePodDNSConfig`` with the relaxed search rules of 1.34, ``ValidateHostAliases``);
what the kubelet makes of them is ``supervisor/pods/setup/dns.py`` and ``podhosts.py``.
The limits here are the API's on the pod's own ``dnsConfig``; the kubelet applies the
same numbers again to the merged result, cutting instead of refusing.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel.fieldcheck import InvalidField

MAX_NAMESERVERS = 3
MAX_SEARCHES = 32
MAX_SEARCH_CHARS = 2048  # the search line, spaces between the paths included

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SEARCH = re.compile(r"^[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?(\.[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?)*$")
LABEL_RULE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
IP_RULE = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


class DnsPolicy(enum.Enum):
    CLUSTER_FIRST = "ClusterFirst"
    CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
    DEFAULT = "Default"
    NONE = "None"


@dataclass(frozen=True, slots=True)
class DnsOption:
    name: str
    value: str | None = None  # ``ndots: "2"`` is ``ndots:2`` in resolv.conf; None: the name alone


@dataclass(frozen=True, slots=True)
class DnsConfig:
    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[DnsOption, ...] = ()


@dataclass(frozen=True, slots=True)
class HostAlias:
    ip: str
    hostnames: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PodDns:
    """The spec's fields as the API server leaves them: ``dnsPolicy`` defaulted."""

    policy: DnsPolicy = DnsPolicy.CLUSTER_FIRST
    config: DnsConfig | None = None
    hostname: str = ""
    subdomain: str = ""
    set_hostname_as_fqdn: bool = False
    host_aliases: tuple[HostAlias, ...] = ()


def parse_pod_dns(spec: dict[str, Any]) -> PodDns:
    """The DNS fields of a pod's spec; InvalidField naming the first one the API refuses."""
    policy = _policy(spec.get("dnsPolicy"))
    config = _config(spec.get("dnsConfig"), policy)
    return PodDns(
        policy=policy,
        config=config,
        hostname=_label(spec.get("hostname"), "spec.hostname"),
        subdomain=_label(spec.get("subdomain"), "spec.subdomain"),
        set_hostname_as_fqdn=bool(
            f.boolean(spec.get("setHostnameAsFQDN"), "spec.setHostnameAsFQDN")
        ),
        host_aliases=_host_aliases(spec.get("hostAliases"), "spec.hostAliases"),
    )


def _policy(value: Any) -> DnsPolicy:
    """Unset or empty is the API's default, ClusterFirst."""
    allowed = tuple(p.value for p in DnsPolicy)
    given = None if value == "" else value
    return DnsPolicy(f.choice(given, "spec.dnsPolicy", allowed, DnsPolicy.CLUSTER_FIRST.value))


def _config(value: Any, policy: DnsPolicy) -> DnsConfig | None:
    path = "spec.dnsConfig"
    entry = f.optional_mapping(value, path)
    if entry is None:
        if policy is DnsPolicy.NONE:
            raise InvalidField(
                f"{path}: required value: must provide `dnsConfig` when `dnsPolicy` is None"
            )
        return None
    config = DnsConfig(
        nameservers=_nameservers(entry.get("nameservers"), f"{path}.nameservers"),
        searches=_searches(entry.get("searches"), f"{path}.searches"),
        options=_options(entry.get("options"), f"{path}.options"),
    )
    if policy is DnsPolicy.NONE and not config.nameservers:
        raise InvalidField(
            f"{path}.nameservers: required value: must provide at least one DNS nameserver "
            "when `dnsPolicy` is None"
        )
    return config


def _nameservers(value: Any, path: str) -> tuple[str, ...]:
    servers = f.strings(value, path)
    if len(servers) > MAX_NAMESERVERS:
        raise InvalidField(
            f"{path}: invalid value {list(servers)!r}: must not have more than "
            f"{MAX_NAMESERVERS} nameservers"
        )
    for i, server in enumerate(servers):
        _ip(server, f"{path}[{i}]")
    return servers


def _searches(value: Any, path: str) -> tuple[str, ...]:
    searches = f.strings(value, path)
    if len(searches) > MAX_SEARCHES:
        raise InvalidField(
            f"{path}: invalid value: must not have more than {MAX_SEARCHES} search paths"
        )
    if len(" ".join(searches)) > MAX_SEARCH_CHARS:
        raise InvalidField(
            f"{path}: invalid value: must not have more than {MAX_SEARCH_CHARS} characters "
            "(including spaces) in the search list"
        )
    for i, search in enumerate(searches):
        name = search if search == "." else search.removesuffix(".")
        if name != "." and (len(name) > 253 or not _SEARCH.match(name)):
            raise InvalidField(
                f"{path}[{i}]: invalid value {search!r}: a DNS search path must be '.' or "
                "consist of lower case alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character or '_'"
            )
    return searches


def _options(value: Any, path: str) -> tuple[DnsOption, ...]:
    found = []
    for i, item in enumerate(f.items(value, path)):
        entry = f.mapping(item, f"{path}[{i}]")
        name = f.string(entry.get("name"), f"{path}[{i}].name")
        if not name:
            raise InvalidField(f"{path}[{i}].name: required value: must not be empty")
        raw = entry.get("value")
        found.append(DnsOption(name, None if raw is None else f.string(raw, f"{path}[{i}].value")))
    return tuple(found)


def _host_aliases(value: Any, path: str) -> tuple[HostAlias, ...]:
    found = []
    for i, item in enumerate(f.items(value, path)):
        entry = f.mapping(item, f"{path}[{i}]")
        ip = f.string(entry.get("ip"), f"{path}[{i}].ip")
        _ip(ip, f"{path}[{i}].ip")
        names = f.strings(entry.get("hostnames"), f"{path}[{i}].hostnames")
        for j, name in enumerate(names):
            if len(name) > 253 or not _SUBDOMAIN.match(name):
                raise InvalidField(
                    f"{path}[{i}].hostnames[{j}]: invalid value {name!r}: {SUBDOMAIN_RULE}"
                )
        found.append(HostAlias(ip, names))
    return tuple(found)


def _label(value: Any, path: str) -> str:
    text = f.string(value, path)
    if text and (len(text) > 63 or not _LABEL.match(text)):
        raise InvalidField(f"{path}: invalid value {text!r}: {LABEL_RULE}")
    return text


def _ip(text: str, path: str) -> None:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise InvalidField(f"{path}: invalid value {text!r}: {IP_RULE}") from None
