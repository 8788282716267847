"""The plugin watcher's loop over a real directory of real unix sockets, with fake plugins,
a fake API, the jobs run inline and a stepped clock: what a socket appearing, going, failing
or dying tells the parent, and what a restarted watcher tells it."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pkletd.ipc.apiclient.jsonapi import ApiCallFailed
from pkletd.ipc.bus import messages as m
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.csi.client import CsiError
from pkletd.ipc.inotify import DirEvents
from pkletd.workers.pluginwatcher.fakes import FakeCsiNodeApi, FakePlugins
from pkletd.workers.pluginwatcher.nodeinfo import NodeInfoManager
from pkletd.workers.pluginwatcher.registrar import Registrar
from pkletd.workers.pluginwatcher.worker import (
    HEALTH_S,
    RETRY_FIRST_S,
    RETRY_MAX_S,
    PluginWatcher,
)

SNAPSHOT = m.Snapshot(seq=0, pods=[], containers={})


class FakeWatch:
    """A watch whose fd is a pipe; the test says when the directory changed."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        self.fd = self._read
        self.watching = False
        self.watched: list[Path] = []
        self.made: set[str] = set()  # names inotify would report made

    def watch(self, path: Path) -> bool:
        self.watched.append(path)
        self.watching = path.is_dir()
        return self.watching

    def read(self) -> DirEvents:
        made, self.made = self.made, set()
        return DirEvents(False, frozenset(made))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self._read)
            os.close(self._write)
            self.fd = -1


class InlineRunner:
    def submit(self, job: Callable[[], None]) -> object:
        job()
        return None

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class Node:
    """One node's API objects and plugins, and the watchers run on it one after another."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "plugins_registry"
        self.api = FakeCsiNodeApi("n1")
        self.plugins = FakePlugins()
        self.clock = FakeClock()
        self.bus = FakeSender()
        self.listeners: dict[str, socket.socket] = {}
        self.watcher = self.start()

    def start(self) -> PluginWatcher:
        registrar = Registrar(self.plugins, NodeInfoManager(self.api, "n1"), self.clock)
        watch = FakeWatch()
        self.watcher = PluginWatcher(
            self.bus, self.dir, registrar, watch, InlineRunner(), self.clock
        )
        self.watch = watch
        return self.watcher

    def snapshot(self) -> None:
        self.watcher.on_snapshot(SNAPSHOT)
        self.deliver()

    def deliver(self) -> None:
        """What the job thread reported, as the loop takes it when woken."""
        for fd in self.watcher.fds():
            if fd != self.watch.fd:
                self.watcher.on_readable(fd)

    def changed(self) -> None:
        self.watcher.on_readable(self.watch.fd)
        self.deliver()

    def tick(self, seconds: float) -> None:
        self.clock.step(seconds)
        self.watcher.tick(self.clock.monotonic())
        self.deliver()

    def socket(self, name: str) -> str:
        self.dir.mkdir(exist_ok=True)
        path = str(self.dir / name)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        self.listeners[path] = listener
        return path

    def remove(self, path: str) -> None:
        os.unlink(path)
        self.listeners.pop(path).close()

    def close(self) -> None:
        if self.watch.fd >= 0:
            self.watcher.close()
        for listener in self.listeners.values():
            listener.close()
        self.listeners.clear()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    found = Node(tmp_path)
    yield found
    found.close()


def registered(name: str, endpoint: str, node_id: str = "node-1") -> m.CsiDriverRegistered:
    return m.CsiDriverRegistered(name, endpoint, node_id, 0, {}, ["1.0.0"])


def info(name: str, endpoint: str, node_id: str = "node-1") -> m.CsiDriverInfo:
    return m.CsiDriverInfo(
        name=name,
        endpoint=endpoint,
        node_id=node_id,
        max_volumes=0,
        topology={},
        versions=["1.0.0"],
    )


def test_the_directory_is_made_0750_and_what_it_holds_is_registered_then_listed(
    node: Node,
) -> None:
    node.dir.mkdir(mode=0o700)
    node.dir.rmdir()
    node.snapshot()
    assert stat.S_IMODE(node.dir.stat().st_mode) == 0o750 & ~_umask()
    assert node.bus.take() == [m.CsiDriversListed([])]
    assert node.api.drivers() == []  # the CSINode is there, with no drivers
    node.close()

    second = Node(node.dir.parent)
    a = second.socket("a.csi.example.com-reg.sock")
    second.socket(".hidden-reg.sock")
    (second.dir / "not-a-socket").write_text("x")
    second.plugins.add(a, "a.csi.example.com")
    second.plugins.add(str(second.dir / ".hidden-reg.sock"), "hidden.csi.example.com")
    second.snapshot()
    assert second.bus.take() == [
        registered("a.csi.example.com", a),
        m.CsiDriversListed([info("a.csi.example.com", a)]),
    ]
    second.close()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_new_socket_registers_and_a_removed_one_deregisters(node: Node) -> None:
    node.snapshot()
    node.bus.take()
    a = node.socket("a-reg.sock")
    node.plugins.add(a, "a.csi.example.com", node_id="x", topology={"zone": "z1"})
    node.changed()
    assert node.bus.take() == [
        m.CsiDriverRegistered("a.csi.example.com", a, "x", 0, {"zone": "z1"}, ["1.0.0"])
    ]
    assert [d["name"] for d in node.api.drivers()] == ["a.csi.example.com"]
    assert node.plugins.sockets[a].notified == [(True, "")]
    node.remove(a)
    node.changed()
    assert node.bus.take() == [m.CsiDriverGone("a.csi.example.com")]
    assert node.api.drivers() == [] and node.api.node_ids() is None


def test_a_socket_made_anew_registers_again(node: Node) -> None:
    a = node.socket("a-reg.sock")
    node.plugins.add(a, "a.csi.example.com")
    node.snapshot()
    node.bus.take()
    node.remove(a)
    node.socket("a-reg.sock")  # the driver restarted between two reads of the directory
    node.watch.made.add("a-reg.sock")
    node.changed()
    assert node.bus.take() == [
        m.CsiDriverGone("a.csi.example.com"),
        registered("a.csi.example.com", a),
    ]


def test_a_refused_registration_is_tried_again_with_back_off(node: Node) -> None:
    node.snapshot()
    node.bus.take()
    a = node.socket("a-reg.sock")
    node.plugins.add(a, "a.csi.example.com")
    node.plugins.endpoints[a] = CsiError("NodeGetInfo", "UNAVAILABLE", "starting")
    node.changed()
    assert node.bus.take() == []
    node.tick(RETRY_FIRST_S)  # tried again, refused again: next in 1 s
    node.tick(RETRY_FIRST_S)
    assert node.plugins.node_info_calls == [a, a]
    node.plugins.add(a, "a.csi.example.com")
    node.tick(RETRY_FIRST_S * 2)
    assert node.bus.take() == [registered("a.csi.example.com", a)]
    assert [ok for ok, _ in node.plugins.sockets[a].notified] == [True]


def test_a_dead_driver_whose_socket_stays_is_deregistered_by_the_health_check(
    node: Node,
) -> None:
    a = node.socket("a-reg.sock")
    plugin = node.plugins.add(a, "a.csi.example.com")
    node.snapshot()
    node.bus.take()
    plugin.get_info_error = CsiError("GetInfo", "UNAVAILABLE", "connection refused")
    node.tick(HEALTH_S)
    assert node.bus.take() == [m.CsiDriverGone("a.csi.example.com")]
    assert node.api.drivers() == []
    plugin.get_info_error = None  # it came back on the same socket
    node.tick(RETRY_FIRST_S)
    assert node.bus.take() == [registered("a.csi.example.com", a)]


def test_a_restarted_watcher_reports_every_driver_and_forgets_what_went_meanwhile(
    node: Node,
) -> None:
    a, b = node.socket("a-reg.sock"), node.socket("b-reg.sock")
    node.plugins.add(a, "a.csi.example.com")
    node.plugins.add(b, "b.csi.example.com")
    node.snapshot()
    node.close()  # SIGKILLed; b's socket goes while no watcher runs
    os.unlink(b)
    node.bus.take()
    node.start()
    node.snapshot()
    assert node.bus.take() == [
        registered("a.csi.example.com", a),
        m.CsiDriversListed([info("a.csi.example.com", a)]),
    ]
    assert [d["name"] for d in node.api.drivers()] == ["a.csi.example.com"]
    assert list(json.loads(node.api.node_ids() or "{}")) == ["a.csi.example.com"]


def test_a_later_snapshot_lists_the_drivers_again(node: Node) -> None:
    a = node.socket("a-reg.sock")
    node.plugins.add(a, "a.csi.example.com")
    node.snapshot()
    node.bus.take()
    node.snapshot()
    assert node.bus.take() == [m.CsiDriversListed([info("a.csi.example.com", a)])]


def test_csinode_initialization_is_tried_again_until_the_node_exists(node: Node) -> None:
    saved, node.api.node = node.api.node, None
    node.snapshot()
    assert node.api.csinode is None
    node.api.node = saved
    node.tick(RETRY_FIRST_S)
    assert node.api.drivers() == []


def _stale_csinode(api: FakeCsiNodeApi, *names: str) -> None:
    """A CSINode left from a previous run of the node, naming drivers gone meanwhile."""
    api.csinode = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n1", "resourceVersion": "1"},
        "spec": {"drivers": [{"name": name, "nodeID": "old"} for name in names]},
    }


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_stale_drivers_are_removed_once_the_node_is_registered(node: Node) -> None:
    _stale_csinode(node.api, "gone.csi.example.com")
    saved, node.api.node = node.api.node, None  # node-lease has not registered it yet
    node.snapshot()
    assert [d["name"] for d in node.api.drivers()] == ["gone.csi.example.com"]
    node.tick(RETRY_FIRST_S)
    node.tick(RETRY_FIRST_S * 2)
    assert [d["name"] for d in node.api.drivers()] == ["gone.csi.example.com"]
    node.api.node = saved
    node.tick(RETRY_FIRST_S * 4)
    assert node.api.drivers() == []
    node.tick(RETRY_MAX_S)  # done: not tried again
    assert node.api.writes == ["update csinode"]


def test_the_clean_up_is_tried_again_with_back_off_after_an_api_error(node: Node) -> None:
    _stale_csinode(node.api, "gone.csi.example.com")
    node.api.failing = ApiCallFailed(503, "the server is currently unable to handle the request")
    node.snapshot()
    node.api.failing = None
    node.tick(RETRY_FIRST_S / 2)  # not due yet
    assert [d["name"] for d in node.api.drivers()] == ["gone.csi.example.com"]
    node.tick(RETRY_FIRST_S / 2)
    assert node.api.drivers() == []


def test_a_node_not_registered_yet_is_a_wait_logged_once_not_an_error(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "pkletd.workers.pluginwatcher")
    a = node.socket("a-reg.sock")
    node.plugins.add(a, "a.csi.example.com")
    _stale_csinode(node.api, "gone.csi.example.com")
    saved, node.api.node = node.api.node, None
    node.snapshot()
    for _ in range(6):  # every step tried again, several times
        node.tick(RETRY_MAX_S)
    assert node.bus.take() == [m.CsiDriversListed([])]
    assert _lines(caplog, logging.ERROR) == []
    waits = [line for line in _lines(caplog, logging.INFO) if line.startswith("waiting")]
    assert len(waits) == 1 and "node=n1 " in waits[0], waits

    node.api.node = saved
    node.tick(RETRY_MAX_S)
    assert node.bus.take() == [registered("a.csi.example.com", a)]
    assert [d["name"] for d in node.api.drivers()] == ["a.csi.example.com"]
    assert _lines(caplog, logging.ERROR) == []
    assert _lines(caplog, logging.INFO).count("node registered node=n1") == 1


def test_the_directory_removed_is_made_and_watched_again(node: Node) -> None:
    node.snapshot()
    node.dir.rmdir()
    node.watch.watching = False
    node.tick(1.0)
    assert node.dir.is_dir() and node.watch.watching


def test_a_job_that_breaks_brings_the_worker_down(node: Node) -> None:
    node.snapshot()
    a = node.socket("a-reg.sock")
    node.plugins.add(a, "a.csi.example.com")
    node.api.node = {"metadata": {"name": "n1"}}  # no resourceVersion: a KeyError inside
    with pytest.raises(RuntimeError, match="a registration job failed: KeyError"):
        node.changed()
