"""Worker processes: one state machine each, and the policy that restarts them.

States (``pkletd status`` shows them): STARTING (forked, not yet ready), RUNNING
(said ready and heartbeats), BACKOFF (exited; waiting to be started again),
STOPPED (not wanted). A state changes only in ``WorkerProcess._become``, which
stamps the time and logs one line.

Why a worker exited (``classify``) is kept apart from what to do about it
(``Children.tick``). A worker that ran for ``STABLE_S`` or more is restarted at
once; one that keeps dying quickly waits ``BACKOFF_BASE_S * 2**n`` (capped), and
``FLAP_COUNT`` quick deaths in a row are reported at ERROR as flapping.
"""

from __future__ import annotations

import enum
import logging
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from pkletd.ipc.bus.workername import WorkerName
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

STABLE_S = 10.0
BACKOFF_BASE_S = 0.1
BACKOFF_MAX_S = 30.0
FLAP_COUNT = 5
STOP_GRACE_S = 5.0
HUNG = "heartbeat timeout"


class State(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    STOPPED = "stopped"


_ALLOWED = {
    State.STOPPED: {State.STARTING},
    State.STARTING: {State.RUNNING, State.BACKOFF, State.STOPPED},
    State.RUNNING: {State.BACKOFF, State.STOPPED},
    State.BACKOFF: {State.STARTING, State.STOPPED},
}


class Spawner(Protocol):
    """What the supervisor needs from whoever forks (the fork server)."""

    def spawn(self, name: WorkerName) -> None: ...

    def signal(self, pid: int, sig: int) -> None: ...


def classify(code: int, expected: bool) -> str:
    """The operator's phrase for an exit, e.g. 'killed by SIGKILL; not expected'."""
    if code < 0:
        what = f"killed by {signal.Signals(-code).name}"
    else:
        what = f"exit status {code}"
    return f"{what}; {'expected' if expected else 'not expected'}"


@dataclass
class WorkerProcess:
    name: WorkerName
    state: State = State.STOPPED
    pid: int = 0
    restarts: int = 0
    changed_at: float = 0.0
    started_at: float = 0.0
    last_heartbeat: float = 0.0
    last_exit: str = ""
    last_exit_code: int | None = None  # exit status, or minus the signal; None: never exited
    quick_deaths: int = 0
    restart_at: float = 0.0
    stop_reason: str = ""  # set while we are stopping it on purpose
    kill_at: float = 0.0

    def _become(self, state: State, now: float, why: str) -> None:
        if state not in _ALLOWED[self.state]:
            raise AssertionError(f"worker {self.name}: {self.state.value} -> {state.value}")
        self.state = state
        self.changed_at = now
        log.info("worker state worker=%s state=%s pid=%d %s", self.name, state.value, self.pid, why)

    def uptime(self, now: float) -> float:
        return now - self.started_at if self.state in (State.STARTING, State.RUNNING) else 0.0

    def as_dict(self, now: float) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid if self.state in (State.STARTING, State.RUNNING) else 0,
            "state": self.state.value,
            "restarts": self.restarts,
            "uptime_s": round(self.uptime(now), 3),
            "last_exit": self.last_exit,
        }


class Children:
    """All worker processes and the policy that keeps them up."""

    def __init__(
        self,
        names: Iterable[WorkerName],
        spawner: Spawner,
        heartbeat_timeout: float,
        clock: Clock = SYSTEM_CLOCK,
        on_ready: Callable[[WorkerName], None] = lambda name: None,
    ) -> None:
        self.workers = {name: WorkerProcess(name) for name in names}
        self._spawner = spawner
        self._timeout = heartbeat_timeout
        self._clock = clock
        self._on_ready = on_ready
        self._pending: dict[WorkerName, WorkerProcess] = {}  # spawned, pid not yet known
        self.shutting_down = False
        self.held: set[WorkerName] = set()  # not started until released

    def start_all(self, hold: Iterable[WorkerName] = ()) -> None:
        """Start every worker but those in ``hold`` (kept stopped until ``release``)."""
        self.held = {name for name in hold if name in self.workers}
        for worker in self.workers.values():
            if worker.name not in self.held:
                self._start(worker, self._clock.monotonic(), "initial start")

    def release(self, why: str) -> None:
        """Start the held workers (none once shutting down)."""
        held, self.held = self.held, set()
        if self.shutting_down:
            return
        for name in sorted(held, key=list(self.workers).index):
            self._start(self.workers[name], self._clock.monotonic(), why)

    def _start(self, worker: WorkerProcess, now: float, why: str) -> None:
        worker.pid = 0
        worker.started_at = now
        worker.last_heartbeat = now
        worker.stop_reason = ""
        worker._become(State.STARTING, now, why)
        self._pending[worker.name] = worker
        self._spawner.spawn(worker.name)

    # --- facts -------------------------------------------------------------------

    def spawned(self, name: WorkerName, pid: int) -> None:
        worker = self._pending.pop(name, None)
        if worker is not None:
            worker.pid = pid
            if self.shutting_down:  # stop_all ran while it was being forked
                self._stop(worker, "shutdown")

    def by_pid(self, pid: int) -> WorkerProcess | None:
        return next((w for w in self.workers.values() if w.pid == pid and pid), None)

    def ready(self, name: WorkerName, pid: int) -> None:
        worker = self.workers.get(name)
        if worker is None or worker.pid != pid or worker.state is not State.STARTING:
            return
        now = self._clock.monotonic()
        worker.last_heartbeat = now
        worker._become(State.RUNNING, now, f"ready_after_ms={(now - worker.started_at) * 1000:.1f}")
        self._on_ready(name)

    def heartbeat(self, name: WorkerName, pid: int) -> None:
        worker = self.workers.get(name)
        if worker is not None and worker.pid == pid:
            worker.last_heartbeat = self._clock.monotonic()

    def exited(self, pid: int, code: int) -> None:
        worker = self.by_pid(pid)
        if worker is None:
            return
        now = self._clock.monotonic()
        expected = worker.stop_reason not in ("", HUNG)
        worker.last_exit = classify(code, expected)
        worker.last_exit_code = code
        if worker.stop_reason:
            worker.last_exit += f" ({worker.stop_reason})"
        level = logging.INFO if expected else logging.WARNING
        log.log(level, "exited: %s (%s) pid=%d", worker.name, worker.last_exit, pid)
        if self.shutting_down:
            worker._become(State.STOPPED, now, "shutdown")
            return
        self._plan_restart(worker, now, expected)
        worker._become(State.BACKOFF, now, f"restart_in_s={worker.restart_at - now:.3f}")
        worker.pid = 0

    def _plan_restart(self, worker: WorkerProcess, now: float, expected: bool) -> None:
        quick = not expected and now - worker.started_at < STABLE_S
        worker.quick_deaths = worker.quick_deaths + 1 if quick else 0
        delay = 0.0
        if worker.quick_deaths > 1:
            delay = min(BACKOFF_BASE_S * 2 ** (worker.quick_deaths - 2), BACKOFF_MAX_S)
        if worker.quick_deaths >= FLAP_COUNT:
            log.error(
                "worker flapping worker=%s quick_deaths=%d last_exit=%r backoff_s=%.1f",
                worker.name,
                worker.quick_deaths,
                worker.last_exit,
                delay,
            )
        worker.restart_at = now + delay

    # --- commands -----------------------------------------------------------------

    def restart(self, name: WorkerName) -> None:
        """Graceful restart: SIGTERM now, SIGKILL after the grace, start again at exit."""
        worker = self.workers[name]
        if worker.state is State.BACKOFF:
            worker.restart_at = self._clock.monotonic()
        elif worker.pid:
            self._stop(worker, "restart requested")

    def _stop(self, worker: WorkerProcess, reason: str) -> None:
        worker.stop_reason = reason
        worker.kill_at = self._clock.monotonic() + STOP_GRACE_S
        self._spawner.signal(worker.pid, signal.SIGTERM)

    def stop_all(self) -> None:
        self.shutting_down = True
        now = self._clock.monotonic()
        for worker in self.workers.values():
            if worker.pid:
                self._stop(worker, "shutdown")
            elif worker.state is not State.STOPPED and worker.name not in self._pending:
                worker._become(State.STOPPED, now, "shutdown")

    def all_stopped(self) -> bool:
        return all(w.state is State.STOPPED for w in self.workers.values())

    # --- policy, run on every loop turn ---------------------------------------------

    def tick(self) -> float:
        """Act on what is due; return the monotonic time of the next deadline."""
        now = self._clock.monotonic()
        deadlines = [now + 1.0]
        for worker in self.workers.values():
            deadlines.append(self._tick_one(worker, now))
        return min(deadlines)

    def _tick_one(self, worker: WorkerProcess, now: float) -> float:
        if worker.stop_reason and worker.pid:
            if now >= worker.kill_at:
                log.warning("stop timed out; killing worker=%s pid=%d", worker.name, worker.pid)
                self._spawner.signal(worker.pid, signal.SIGKILL)
                worker.kill_at = now + STOP_GRACE_S
            return worker.kill_at
        if worker.state is State.BACKOFF and not self.shutting_down:
            if now >= worker.restart_at:
                worker.restarts += 1
                self._start(worker, now, f"restart={worker.restarts}")
                return now + self._timeout
            return worker.restart_at
        if worker.state in (State.STARTING, State.RUNNING) and worker.pid:
            deadline = worker.last_heartbeat + self._timeout
            if now >= deadline:
                log.error(
                    "worker hung; killing worker=%s pid=%d silent_s=%.1f",
                    worker.name,
                    worker.pid,
                    now - worker.last_heartbeat,
                )
                worker.stop_reason = HUNG
                worker.kill_at = now + STOP_GRACE_S
                self._spawner.signal(worker.pid, signal.SIGKILL)
                return worker.kill_at
            return deadline
        return now + 1.0

    def heartbeats_fresh(self) -> bool:
        now = self._clock.monotonic()
        return all(
            now - w.last_heartbeat < self._timeout
            for w in self.workers.values()
            if w.state is State.RUNNING
        )
