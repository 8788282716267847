"""Requests in a tight loop on a thread, one after another, each on a new connection, while
the test or the bench kills the server: every attempt with its outcome, start and end.

An attempt is refused (nothing listens: ``ECONNREFUSED``), cut (the connection was
accepted, then reset or closed before a whole answer: a request in flight in a process
that was killed), failed (anything else: a timeout, a wrong answer) or answered.
"""

from __future__ import annotations

import enum
import http.client
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

TIMEOUT_S = 10.0


class Outcome(enum.Enum):
    ANSWERED = "answered"
    REFUSED = "refused"
    CUT = "cut"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Attempt:
    begun: float  # time.perf_counter()
    ended: float
    outcome: Outcome
    error: str = ""

    @property
    def wait(self) -> float:
        return self.ended - self.begun


def healthz(port: int) -> Callable[[], None]:
    """GET http://127.0.0.1:<port>/healthz; raises unless it answers 200 ``ok``."""
    return lambda: _get(http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S))


def https_healthz(port: int, context: ssl.SSLContext) -> Callable[[], None]:
    """The same over TLS (the kubelet API's port)."""
    return lambda: _get(
        http.client.HTTPSConnection("127.0.0.1", port, timeout=TIMEOUT_S, context=context)
    )


def _get(connection: http.client.HTTPConnection) -> None:
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        body = response.read()
        if response.status != 200 or body != b"ok":
            raise AssertionError(f"answered {response.status} {body!r}")
    finally:
        connection.close()


def classify(exc: BaseException) -> Outcome:
    if isinstance(exc, ConnectionRefusedError):
        return Outcome.REFUSED
    if isinstance(exc, ConnectionResetError | BrokenPipeError | http.client.RemoteDisconnected) or (
        isinstance(exc, ssl.SSLError) and "EOF" in str(exc)
    ):
        return Outcome.CUT
    return Outcome.FAILED


class RequestLoop:
    """``ask`` in a loop on a thread from ``start()`` to ``stop()``."""

    def __init__(self, ask: Callable[[], None]) -> None:
        self._ask = ask
        self.attempts: list[Attempt] = []  # appended by the loop's thread only
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="request-loop", daemon=True)

    def start(self) -> RequestLoop:
        self._thread.start()
        return self

    def stop(self) -> list[Attempt]:
        self._stop.set()
        self._thread.join(TIMEOUT_S + 5)
        return self.attempts

    def _run(self) -> None:
        while not self._stop.is_set():
            begun = time.perf_counter()
            try:
                self._ask()
            except Exception as exc:  # noqa: BLE001 (every error is an outcome to count)
                self.attempts.append(
                    Attempt(
                        begun, time.perf_counter(), classify(exc), f"{type(exc).__name__}: {exc}"
                    )
                )
                if classify(exc) is Outcome.REFUSED:
                    time.sleep(0.0001)  # a refusal is instant: leave the GIL to the others
                continue
            self.attempts.append(Attempt(begun, time.perf_counter(), Outcome.ANSWERED))

    def answered_since(self, when: float) -> Attempt | None:
        """The first attempt begun at or after ``when`` that was answered."""
        found = None
        for attempt in reversed(self.attempts):  # recent ones last; few begun after ``when``
            if attempt.begun < when:
                break
            if attempt.outcome is Outcome.ANSWERED:
                found = attempt
        return found

    def count(self, outcome: Outcome) -> int:
        return sum(1 for a in self.attempts if a.outcome is outcome)
