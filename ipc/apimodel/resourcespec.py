"""A container's ``resources``: requests and limits, defaulted and validated as the API does.

Defaulting (the API's ``SetDefaults_Pod``, which the kubelet also applies to static
pods): a resource with a limit and no request gets the limit as its request.

Validation (the API's ``ValidateResourceRequirements``), each error naming its
field: a resource name is a standard one (``cpu``, ``memory``,
``ephemeral-storage``, ``hugepages-<size>``) or an extended one (``domain/name``);
a quantity parses and is not negative; a request is at most its limit; hugepages
and extended resources cannot be overcommitted (request equal to the limit, which
must be set; extended ones are whole numbers); hugepages need cpu or memory.
Values are exact fractions (``quantity.parse``), so ``1`` and ``1000m`` are equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.fieldcheck import InvalidField

STANDARD = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"

Amounts = tuple[tuple[str, Fraction], ...]  # (resource name, amount), sorted by name


@dataclass(frozen=True, slots=True)
class Resources:
    """A container's requests and limits, after the API's defaulting."""

    requests: Amounts = ()
    limits: Amounts = ()

    def request(self, name: str) -> Fraction | None:
        return dict(self.requests).get(name)

    def limit(self, name: str) -> Fraction | None:
        return dict(self.limits).get(name)


NONE = Resources()


def parse_resources(container: dict[str, Any], path: str) -> Resources:
    where = f"{path}.resources"
    entry = f.optional_mapping(container.get("resources"), where)
    if entry is None:
        return NONE
    limits = _amounts(entry.get("limits"), f"{where}.limits")
    requests = _amounts(entry.get("requests"), f"{where}.requests")
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    _check(requests, limits, where)
    return Resources(tuple(sorted(requests.items())), tuple(sorted(limits.items())))


def _amounts(value: Any, path: str) -> dict[str, Fraction]:
    found: dict[str, Fraction] = {}
    for name, raw in (f.optional_mapping(value, path) or {}).items():
        where = f"{path}[{name}]"
        _check_name(name, where)
        try:
            amount = quantity.parse(raw)
        except quantity.BadQuantity as exc:
            raise InvalidField(f"{where}: invalid value {raw!r}: {exc}") from exc
        if amount < 0:
            raise InvalidField(
                f"{where}: invalid value {raw!r}: must be greater than or equal to 0"
            )
        if _extended(name) and amount.denominator != 1:
            raise InvalidField(f"{where}: invalid value {raw!r}: must be an integer")
        found[name] = amount
    return found


def _check_name(name: str, path: str) -> None:
    if "/" not in name:
        if name not in STANDARD and not name.startswith(HUGEPAGES_PREFIX):
            raise InvalidField(
                f"{path}: invalid value {name!r}: must be a standard resource for containers"
            )
    elif name.startswith("kubernetes.io/") or name.startswith("requests."):
        raise InvalidField(
            f"{path}: invalid value {name!r}: doesn't follow extended resource name standard"
        )


def _extended(name: str) -> bool:
    return "/" in name


def _overcommit_allowed(name: str) -> bool:
    return not _extended(name) and not name.startswith(HUGEPAGES_PREFIX)


def _check(requests: dict[str, Fraction], limits: dict[str, Fraction], where: str) -> None:
    for name, request in sorted(requests.items()):
        limit = limits.get(name)
        shown = _show(request)
        if limit is None:
            if not _overcommit_allowed(name):
                raise InvalidField(
                    f"{where}.limits: required value: Limit must be set for non overcommitable "
                    "resources"
                )
        elif request != limit and not _overcommit_allowed(name):
            raise InvalidField(
                f"{where}.requests: invalid value {shown!r}: must be equal to {name} limit of "
                f"{_show(limit)}"
            )
        elif request > limit:
            raise InvalidField(
                f"{where}.requests: invalid value {shown!r}: must be less than or equal to "
                f"{name} limit of {_show(limit)}"
            )
    names = set(requests) | set(limits)
    if any(n.startswith(HUGEPAGES_PREFIX) for n in names) and not names & {"cpu", "memory"}:
        raise InvalidField(f"{where}: forbidden: HugePages require cpu or memory")


def _show(amount: Fraction) -> str:
    """A quantity as text: whole numbers as they are, else in thousandths (``500m``)."""
    if amount.denominator == 1:
        return str(amount.numerator)
    return f"{quantity.milli(amount)}m"


def parse_amounts(value: Any, path: str) -> Amounts:
    """A resource list outside a container (the pod's ``overhead``), checked as one."""
    return tuple(sorted(_amounts(value, path).items()))
