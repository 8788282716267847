"""The parent's CSI driver registry: what the plugin watcher's messages make of it, what
the CSI volume manager reads from pod worker threads while it changes, and what `pkletd
status` shows of it."""

from __future__ import annotations

import threading
import time

from pkletd.ipc.bus import messages as m
from pkletd.supervisor.cli import format_status
from pkletd.supervisor.pods.csidrivers import CsiDrivers

A = "a.csi.example.com"
B = "b.csi.example.com"


def registered(name: str, endpoint: str, node_id: str = "n1") -> m.CsiDriverRegistered:
    return m.CsiDriverRegistered(name, endpoint, node_id, 16, {"zone": "z1"}, ["1.0.0"])


def info(name: str, endpoint: str) -> m.CsiDriverInfo:
    return m.CsiDriverInfo(
        name=name, endpoint=endpoint, node_id="n1", max_volumes=0, topology={}, versions=["1.5"]
    )


def test_registered_gone_and_registered_again() -> None:
    drivers = CsiDrivers()
    assert drivers.endpoint(A) is None
    drivers.registered(registered(A, "/p/a/csi.sock"))
    assert drivers.endpoint(A) == "/p/a/csi.sock"
    found = drivers.get(A)
    assert found is not None and found.max_volumes == 16 and dict(found.topology) == {"zone": "z1"}
    drivers.registered(registered(A, "/p/a2/csi.sock", "n2"))  # a newer driver replaces it
    assert drivers.endpoint(A) == "/p/a2/csi.sock"
    drivers.gone(A)
    drivers.gone(A)
    assert drivers.endpoint(A) is None and drivers.names() == []


def test_a_listing_is_the_whole_set() -> None:
    drivers = CsiDrivers()
    drivers.registered(registered(A, "/p/a/csi.sock"))
    drivers.registered(registered(B, "/p/b/csi.sock"))
    drivers.listed([info(B, "/p/b2/csi.sock")])  # a went while no watcher ran
    assert drivers.names() == [B]
    assert drivers.endpoint(B) == "/p/b2/csi.sock"


def test_readers_on_other_threads_see_whole_entries_while_the_loop_writes() -> None:
    drivers = CsiDrivers()
    stop = threading.Event()
    seen: set[str | None] = set()
    broken: list[str] = []

    def read() -> None:
        while not stop.is_set():
            seen.add(drivers.endpoint(A))
            found = drivers.get(A)
            if found is not None and not found.endpoint.endswith(found.node_id):
                broken.append(f"{found.endpoint} with {found.node_id}")

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 10.0
    i = 0
    while len(seen) < 20 and time.monotonic() < deadline:  # until the readers saw changes
        i += 1
        drivers.registered(registered(A, f"/p/{i}", str(i)))
        drivers.listed([info(B, "/p/b")] if i % 2 else [])
    stop.set()
    for reader in readers:
        reader.join(10)
    assert len(seen) >= 20 and broken == []


def test_status_lists_the_drivers() -> None:
    drivers = CsiDrivers()
    drivers.registered(registered(A, "/var/lib/kubelet/plugins/a/csi.sock", "node-a"))
    drivers.listed([*[d for d in _infos(drivers)], info(B, "/r/b-reg.sock")])
    status = {
        "node": {"name": "n1", "joined": False},
        "workers": [],
        "pods": [],
        "csi_drivers": drivers.status(),
    }
    lines = format_status(status, now=0.0).splitlines()
    at = lines.index(next(line for line in lines if line.startswith("CSI DRIVER")))
    assert lines[at].split() == [
        "CSI",
        "DRIVER",
        "NODE",
        "ID",
        "MAX",
        "VOLUMES",
        "ENDPOINT",
        "TOPOLOGY",
    ]
    assert lines[at + 1].split() == [
        A,
        "node-a",
        "16",
        "/var/lib/kubelet/plugins/a/csi.sock",
        "zone=z1",
    ]
    assert lines[at + 2].split() == [B, "n1", "-", "/r/b-reg.sock", "-"]
    assert not any(
        "CSI DRIVER" in line for line in format_status({**status, "csi_drivers": []}).splitlines()
    )


def _infos(drivers: CsiDrivers) -> list[m.CsiDriverInfo]:
    return [
        m.CsiDriverInfo(
            name=d["name"],
            endpoint=d["endpoint"],
            node_id=d["node_id"],
            max_volumes=d["max_volumes"],
            topology=d["topology"],
            versions=d["versions"],
        )
        for d in drivers.status()
    ]
