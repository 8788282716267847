"""A pod's DNS fields as ``ValidatePodSpec`` checks them: ``validatePodDNSConfig`` (with the
relaxed search rules, GA in 1.34), ``hostname`` and ``subdomain`` as labels, and
``ValidateHostAliases``; worded as the real messages."""

from __future__ import annotations

import ipaddress
import re

from tests.harness.apiserver.kinds.base import Obj
from tests.harness.apiserver.validation import FieldError, dns1123_label, dns1123_subdomain

MAX_NAMESERVERS = 3
MAX_SEARCHES = 32
MAX_SEARCH_CHARS = 2048
_SEARCH = r"[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?(\.[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?)*"
IP_DETAIL = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


def validate_dns(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("hostname", "subdomain"):
        if spec.get(key):
            errs += [
                FieldError.invalid(f"spec.{key}", spec[key], p) for p in dns1123_label(spec[key])
            ]
    for i, alias in enumerate(spec.get("hostAliases") or []):
        path = f"spec.hostAliases[{i}]"
        errs += _ip(f"{path}.ip", alias.get("ip", ""))
        for j, name in enumerate(alias.get("hostnames") or []):
            errs += [
                FieldError.invalid(f"{path}.hostnames[{j}]", name, p)
                for p in dns1123_subdomain(name)
            ]
    return errs + _dns_config(spec.get("dnsConfig"), spec.get("dnsPolicy"))


def _dns_config(config: Obj | None, policy: str | None) -> list[FieldError]:
    path = "spec.dnsConfig"
    if policy == "None":
        if config is None:
            return [FieldError.required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not config.get("nameservers"):
            return [
                FieldError.required(
                    f"{path}.nameservers",
                    "must provide at least one DNS nameserver when `dnsPolicy` is None",
                )
            ]
    if config is None:
        return []
    errs: list[FieldError] = []
    servers = config.get("nameservers") or []
    if len(servers) > MAX_NAMESERVERS:
        errs.append(
            FieldError.invalid(
                f"{path}.nameservers",
                servers,
                f"must not have more than {MAX_NAMESERVERS} nameservers",
            )
        )
    for i, server in enumerate(servers):
        errs += _ip(f"{path}.nameservers[{i}]", server)
    errs += _searches(config.get("searches") or [], f"{path}.searches")
    for i, option in enumerate(config.get("options") or []):
        if not option.get("name"):
            errs.append(FieldError.required(f"{path}.options[{i}]", "must not be empty"))
    return errs


def _searches(searches: list[str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if len(searches) > MAX_SEARCHES:
        detail = f"must not have more than {MAX_SEARCHES} search paths"
        errs.append(FieldError.invalid(path, searches, detail))
    if len(" ".join(searches)) > MAX_SEARCH_CHARS:
        detail = (
            f"must not have more than {MAX_SEARCH_CHARS} characters (including spaces) in the "
            "search list"
        )
        errs.append(FieldError.invalid(path, searches, detail))
    for i, search in enumerate(searches):
        name = search.removesuffix(".") if search != "." else search
        if name != "." and (len(name) > 253 or not re.fullmatch(_SEARCH, name)):
            detail = (
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                f"character (e.g. 'example.com', regex used for validation is '{_SEARCH}')"
            )
            errs.append(FieldError.invalid(f"{path}[{i}]", search, detail))
    return errs


def _ip(path: str, value: str) -> list[FieldError]:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return [FieldError.invalid(path, value, IP_DETAIL)]
    return []
