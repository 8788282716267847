"""The CSI drivers registered on this node, as the plugin-watcher worker reports them: the
parent's counterpart of the kubelet's ``csiDrivers`` store (``pkg/volume/csi``).

The loop thread writes (``registered``, ``gone``, ``listed``, from the bus); the pod
workers' threads read (``endpoint``, ``get``) while it does. Entries are frozen and the
map is replaced whole on every change, never changed in place, so a reader sees the map
before or after a change, never one half made, and needs no lock.

A restarted plugin watcher registers what it finds and then lists every driver
(``CsiDriversListed``); until that list comes the old entries stay, so a pod mounting a
volume while the watcher restarts still finds its driver.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pkletd.ipc.bus.messages import CsiDriverInfo, CsiDriverRegistered

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CsiDriver:
    name: str
    endpoint: str  # the driver's Node service: a unix socket path
    node_id: str
    max_volumes: int  # 0: the driver sets no limit
    topology: Mapping[str, str]
    versions: tuple[str, ...]

    @classmethod
    def of(cls, found: CsiDriverRegistered | CsiDriverInfo) -> CsiDriver:
        if isinstance(found, CsiDriverRegistered):
            found = _info(found)
        return cls(
            found["name"],
            found["endpoint"],
            found["node_id"],
            found["max_volumes"],
            MappingProxyType(dict(found["topology"])),
            tuple(found["versions"]),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "endpoint": self.endpoint,
            "node_id": self.node_id,
            "max_volumes": self.max_volumes,
            "topology": dict(self.topology),
            "versions": list(self.versions),
        }


def _info(message: CsiDriverRegistered) -> CsiDriverInfo:
    return CsiDriverInfo(
        name=message.name,
        endpoint=message.endpoint,
        node_id=message.node_id,
        max_volumes=message.max_volumes,
        topology=message.topology,
        versions=message.versions,
    )


class CsiDrivers:
    """Driver name -> ``CsiDriver``; read from any thread, written from the loop's."""

    def __init__(self) -> None:
        self._drivers: Mapping[str, CsiDriver] = MappingProxyType({})

    # --- readers (any thread) -------------------------------------------------------

    def endpoint(self, name: str) -> str | None:
        """The socket of the driver's Node service; None while no such driver is
        registered."""
        found = self._drivers.get(name)
        return found.endpoint if found is not None else None

    def get(self, name: str) -> CsiDriver | None:
        return self._drivers.get(name)

    def endpoints(self) -> dict[str, str]:
        """Every driver's Node service socket, by name (what the http worker is told)."""
        return {name: driver.endpoint for name, driver in self._drivers.items()}

    def names(self) -> list[str]:
        return sorted(self._drivers)

    def status(self) -> list[dict[str, Any]]:
        """Every driver for ``pkletd status``, by name."""
        drivers = self._drivers
        return [drivers[name].as_dict() for name in sorted(drivers)]

    # --- writers (the loop thread) ----------------------------------------------------

    def registered(self, message: CsiDriverRegistered) -> None:
        driver = CsiDriver.of(message)
        if self._drivers.get(driver.name) == driver:
            return
        self._drivers = MappingProxyType({**self._drivers, driver.name: driver})
        log.info(
            "CSI driver registered driver=%s endpoint=%s node_id=%s",
            driver.name,
            driver.endpoint,
            driver.node_id,
        )

    def gone(self, name: str) -> None:
        if name not in self._drivers:
            return
        self._drivers = MappingProxyType({k: v for k, v in self._drivers.items() if k != name})
        log.info("CSI driver deregistered driver=%s", name)

    def listed(self, drivers: list[CsiDriverInfo]) -> None:
        """The plugin watcher's full set: drivers not in it are gone."""
        listed = {d["name"]: CsiDriver.of(d) for d in drivers}
        for name in sorted(set(self._drivers) - set(listed)):
            log.info("CSI driver deregistered driver=%s (not listed)", name)
        for name in sorted(set(listed) - set(self._drivers)):
            log.info("CSI driver registered driver=%s (listed)", name)
        self._drivers = MappingProxyType(listed)
