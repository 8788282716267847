"""Which CSI versions a driver may register with, as the kubelet's CSI plugin decides
(``csi_plugin.go highestSupportedVersion``, ``validateVersions``).

A version is ``[v]MAJOR.MINOR[.PATCH...]`` (the kubelet's generic parse). Of the versions a
driver offers, those above 1.x are ignored (CSI 2 need not be compatible); the highest of
the rest must be a 1.x (0.x is no longer served); and a driver of a name already
registered must offer a higher one than the driver it replaces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Version = tuple[int, ...]

_VERSION = re.compile(r"^\s*v?([0-9]+(?:\.[0-9]+)+)\s*$")


class VersionRefused(ValueError):
    """The driver's versions do not allow it to register."""


def parse(text: str) -> Version:
    found = _VERSION.match(text)
    if found is None:
        raise VersionRefused(f"version {text!r} is not MAJOR.MINOR[.PATCH]")
    return tuple(int(part) for part in found.group(1).split("."))


def shown(version: Version) -> str:
    return ".".join(str(part) for part in version)


def highest_supported(versions: Sequence[str]) -> Version:
    """The highest of ``versions`` pkletd speaks; ``VersionRefused`` if none is a 1.x."""
    if not versions:
        raise VersionRefused("the plugin offers no supported versions (an empty list)")
    usable: list[Version] = []
    unparsed = ""
    for text in versions:
        try:
            version = parse(text)
        except VersionRefused as exc:
            unparsed = str(exc)
            continue
        if version[0] <= 1:
            usable.append(version)
    if not usable:
        why = f": {unparsed}" if unparsed else ""
        raise VersionRefused(f"none of the versions {list(versions)} is supported{why}")
    highest = max(usable)
    if highest[0] != 1:
        raise VersionRefused(f"highest supported version is {shown(highest)}, must be v1.x")
    return highest


def replaces(new: Version, registered: Version | None, name: str) -> None:
    """Refuse a driver named as one registered unless it offers a higher version."""
    if registered is not None and not registered < new:
        raise VersionRefused(
            f"another driver named {name!r} is already registered with a higher or equal "
            f"supported version: {shown(registered)}"
        )
