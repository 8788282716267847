"""One soak: containerd, the API server, the node and its pods; every fault in turn, each
followed by the shared must-holds (``Soak.settle``); everything stopped at the end.

The run is bounded twice: each fault stops making faults once ``Options.time_limit`` is
spent (its row then says how many it made, and fails), and a timer stops the whole run
``HARD_GRACE_S`` later wherever it is, so the cleanup still runs.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench.common import clean_runtime
from tests.harness.apiserver import ApiServer, ApiServerConfig
from tests.harness.apiserver.client import Kube
from tests.harness.containerd import PrivateContainerd, ensure_installed
from tests.harness.node import dump_logs
from tests.soak import busfuzz, bussocket, diskfull, httpfuzz, kills, manifests, runtime
from tests.soak.context import Soak, within
from tests.soak.node import SoakNode
from tests.soak.observe import Fingerprint
from tests.soak.plan import Counts
from tests.soak.podmix import ON_PURPOSE, PodSet, config_map
from tests.soak.report import Row

HARD_GRACE_S = 300.0
FAULTS: dict[str, Callable[[Soak], Row]] = {
    "worker-kill": kills.worker_kills,
    "parent-kill": kills.parent_kills,
    "containerd-restart": runtime.restarts,
    "worker-stop": kills.worker_stops,
    "bus-socket": bussocket.run,
    "bus-fuzz": busfuzz.run,
    "http-fuzz": httpfuzz.run,
    "manifest-fuzz": manifests.run,
    "disk-full": diskfull.run,
}


@dataclass(frozen=True)
class Options:
    counts: Counts
    containerd_dir: Path
    seed: int = 1
    time_limit: float = 3600.0
    only: tuple[str, ...] = ()  # fault names; empty: every fault


def progress(message: str) -> None:
    print(f"soak: {message}", file=sys.stderr, flush=True)


class OutOfTime(BaseException):
    """The hard limit: raised in the main thread wherever it is."""


@contextlib.contextmanager
def hard_limit(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, _frame: object) -> None:
        raise OutOfTime(f"the soak ran past its hard limit of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _started(pod: dict[str, Any], stable: bool) -> bool:
    containers = pod["containers"]
    return not stable or (bool(containers) and all(c["state"] == "running" for c in containers))


def bring_up(soak: Soak) -> Row:
    """The pods, started and agreed on: the run's first row."""
    pods, node = soak.pods, soak.node
    row = Row("the pods")
    started = time.monotonic()
    soak.kube.core.create_namespaced_config_map("default", config_map())
    for name, manifest in pods.static.items():
        node.put(name, manifest)
    node.start()
    for manifest in pods.api.values():
        soak.kube.core.create_namespaced_pod("default", manifest)
    wanted, stable = pods.status_names(), pods.stable()

    def up() -> bool:
        have = node.pods()
        return wanted <= have.keys() and all(_started(have[n], n in stable) for n in wanted)

    row.check("every pod running", within(up, 120 + 2 * len(wanted)))
    row.note(f"running {time.monotonic() - started:.1f} s after the start")
    soak.uids.update({n: p["uid"] for n, p in node.pods().items() if n in stable})
    soak.check_statuses(row)
    kinds = sorted({n.split("-")[1] for n in pods.static} | {"api"})
    row.count = f"{len(wanted)} ({', '.join(kinds)}; {', '.join(ON_PURPOSE)} restart on purpose)"
    return row


def run_fault(soak: Soak, name: str) -> Row:
    progress(f"{name}: starting ({soak.deadline - time.monotonic():.0f} s left)")
    started = time.monotonic()
    before = soak.fingerprint()
    try:
        row = FAULTS[name](soak)
    except Exception as exc:  # a fault that could not finish is a failed row, not the end
        traceback.print_exc()
        row = Row(name)
        row.check("ran to the end", False)
        row.note(f"{type(exc).__name__}: {str(exc)[:300]}")
    soak.settle(row, before)
    row.note(f"took {time.monotonic() - started:.0f} s")
    progress(f"{name}: {'held' if row.held else 'FAILED ' + ', '.join(row.failed())}")
    return row


def whole_run(soak: Soak, baseline: Fingerprint, started: float) -> Row:
    row = Row("the whole run")
    silence = soak.node.longest_watchdog_silence()
    row.check(
        f"watchdog never silent {soak.node.unit.watchdog_s:g} s",
        silence < soak.node.unit.watchdog_s,
    )
    row.note(f"longest WATCHDOG=1 gap {silence:.1f} s")
    caused = soak.fingerprint().restarts_since(baseline) + soak.restarted_in_status()
    row.check("0 restarts caused, first to last", not caused)
    restarts = {n: w["restarts"] for n, w in soak.workers().items()}
    row.note(
        "worker restarts since the last supervisor start: "
        + ", ".join(f"{n} {r}" for n, r in sorted(restarts.items()))
    )
    row.count = f"{(time.monotonic() - started) / 60:.1f} min"
    return row


def _soak(soak: Soak, faults: list[str]) -> list[Row]:
    started = time.monotonic()
    rows = [bring_up(soak)]
    baseline = soak.fingerprint()
    rows += [run_fault(soak, name) for name in faults]
    rows.append(whole_run(soak, baseline, started))
    return rows


def run(options: Options) -> list[Row]:
    """The whole soak; its rows. Starts (or reuses) and finally stops its containerd."""
    ensure_installed()
    faults = [f for f in FAULTS if not options.only or f in options.only]
    scratch = Path(tempfile.mkdtemp(prefix="pk-soak-", dir="/tmp"))
    daemon = PrivateContainerd(options.containerd_dir)
    progress(
        f"containerd under {options.containerd_dir}; seed {options.seed}; "
        f"faults: {', '.join(faults)}"
    )
    daemon.start()
    clean_runtime(daemon.address)  # a reused daemon may hold pods of an aborted run
    try:
        with hard_limit(options.time_limit + HARD_GRACE_S):
            return _with_cluster(daemon, options, faults, scratch)
    finally:
        clean_runtime(daemon.address)
        daemon.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _with_cluster(
    daemon: PrivateContainerd, options: Options, faults: list[str], scratch: Path
) -> list[Row]:
    server = ApiServer(scratch / "apiserver", ApiServerConfig(bookmark_interval=1.0))
    server.start()
    kube = Kube(server)
    node = SoakNode(daemon.address, server)
    soak = Soak(
        daemon,
        server,
        kube,
        node,
        options.counts,
        random.Random(options.seed),
        time.monotonic() + options.time_limit,
        PodSet.of(options.counts.pods),
    )
    failed = True
    try:
        rows = _soak(soak, faults)
        failed = not all(r.held for r in rows)
        return rows
    finally:
        if failed:
            dump_logs(node)
        node.stop()
        kube.close()
        server.stop()
        clean_runtime(daemon.address)
        node.close()
