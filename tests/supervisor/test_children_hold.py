"""Workers held back at start (the API workers while the TLS bootstrap runs): stopped
until released, then started in table order; never once the parent is stopping. And
which workers are held: all API workers when the kubeconfig is missing and a bootstrap
kubeconfig is set, none when the kubeconfig is usable or there is no bootstrap."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pkletd.ipc.bus.workername import WorkerName
from pkletd.supervisor import workerset
from pkletd.supervisor.children import State

from tests.supervisor.test_children import make
from tests.supervisor.test_workerset import load

API = (WorkerName.STATUS_MANAGER, WorkerName.NODE_LEASE)


def test_held_workers_start_only_when_released() -> None:
    f = make(WorkerName.PLEG, *API)
    f.kids.start_all(hold=API)
    assert f.spawner.spawned == [WorkerName.PLEG]
    assert all(f.kids.workers[name].state is State.STOPPED for name in API)
    f.kids.release("client certificate issued")
    assert f.spawner.spawned == [WorkerName.PLEG, *API]
    assert not f.kids.held


def test_nothing_held_starts_once_stopping() -> None:
    f = make(WorkerName.PLEG, *API)
    f.kids.start_all(hold=API)
    f.kids.stop_all()
    f.kids.release("too late")
    assert f.spawner.spawned == [WorkerName.PLEG]


def test_the_api_workers_wait_only_for_a_bootstrap(tmp_path: Path) -> None:
    base = load("--kubeconfig", str(tmp_path / "kubelet.conf"))
    assert workerset.waiting_for_certificate(base) == frozenset()
    bootstrapping = dataclasses.replace(base, bootstrap_kubeconfig=str(tmp_path / "b.conf"))
    assert workerset.waiting_for_certificate(bootstrapping) == frozenset(workerset.API_WORKERS)
    assert set(workerset.API_WORKERS) == {
        WorkerName.STATUS_MANAGER,
        WorkerName.NODE_LEASE,
        WorkerName.API_WATCHER,
        WorkerName.POD_OBJECTS,
        WorkerName.PLUGIN_WATCHER,
    }
    assert WorkerName.CERT_MANAGER in workerset.running(bootstrapping)
    assert WorkerName.CERT_MANAGER not in workerset.running(base)
