"""Service account tokens for the pods' projected ``serviceAccountToken`` sources, as
the kubelet's token manager keeps them (``pkg/kubelet/token``).

Each ``TokenKey`` (pod, service account, audience, lifetime) gets a TokenRequest bound
to its pod when a pod first wants it, and a new one once the kubelet would want one
(``requires_refresh``): 80 % of its lifetime gone, or more than 24 hours since it was
issued. Nothing else: a token that seems issued in the future (an API server whose
clock is ahead of the node's, or one that rounds ``expirationTimestamp`` to the second)
is kept, or each new token would ask for the next at once. The clock is wall time
(``expirationTimestamp`` is), injected so tests can step it.

A request that fails is tried again after 1 s, doubling to 30 s. While the token
held still has time left, the failure is only logged (the kubelet keeps handing out
the old token); with none, the parent hears the error. Tokens are never logged.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pkletd.ipc.apiclient.jobs import Jobs
from pkletd.ipc.apiclient.retry import Retry
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.apimodel.references import TokenKey
from pkletd.ipc.bus.messages import TokenIssued
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.podobjects.reading import api_message

log = logging.getLogger(__name__)

MAX_AGE_S = 24 * 3600.0  # the token manager's maxTTL
REFRESH_LEFT = 0.2  # refresh once only this share of the lifetime is left


@dataclass(frozen=True, slots=True)
class Issued:
    """A token as the TokenRequest API answered: ``expires_at`` in wall-clock seconds,
    ``lifetime`` the ``expirationSeconds`` it was issued for."""

    token: str
    expires_at: float
    lifetime: float

    @property
    def issued_at(self) -> float:
        return self.expires_at - self.lifetime


def refresh_at(issued: Issued) -> float:
    """When the kubelet would replace it: 80 % of its lifetime gone, or 24 h old."""
    return min(issued.expires_at - REFRESH_LEFT * issued.lifetime, issued.issued_at + MAX_AGE_S)


def requires_refresh(issued: Issued, now: float) -> bool:
    return now >= refresh_at(issued)


@dataclass(slots=True)
class TokenState:
    issued: Issued | None = None
    retry: Retry = field(default_factory=Retry)
    error: str = ""  # the last request's failure, "" once one succeeds


Request = Callable[[TokenKey], Issued]
Report = Callable[[TokenKey, TokenIssued], None]


class Tokens:
    def __init__(
        self,
        request: Request,
        jobs: Jobs,
        report: Report,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._request = request
        self._jobs = jobs
        self._report = report
        self._clock = clock
        self._states: dict[TokenKey, TokenState] = {}

    def want(self, keys: set[TokenKey]) -> set[TokenKey]:
        """Keep a token for each of ``keys``; the ones no longer wanted (dropped)."""
        dropped = set(self._states) - keys
        for key in dropped:
            del self._states[key]
        for key in keys - set(self._states):
            self._states[key] = TokenState()
        return dropped

    def fileno(self) -> int:
        return self._jobs.fileno()

    def on_readable(self) -> None:
        self._jobs.deliver()

    def close(self) -> None:
        self._jobs.close()

    def tick(self, now: float) -> float:
        """Request what is due (``now`` is monotonic); when the next one is due."""
        wall = self._clock.time()
        wake = now + MAX_AGE_S
        for key, state in self._states.items():
            if self._jobs.busy(key):
                continue
            if state.retry.due > now:
                wake = min(wake, state.retry.due)
            elif state.issued is None or requires_refresh(state.issued, wall):
                self._jobs.submit(key, functools.partial(self._request, key), self._done(key))
            else:
                wake = min(wake, now + refresh_at(state.issued) - wall)
        return wake

    def _done(self, key: TokenKey) -> Callable[[object], None]:
        def done(outcome: object) -> None:
            state = self._states.get(key)
            if state is None:  # no pod wants it any more
                return
            if isinstance(outcome, Issued):
                self._issued(key, state, outcome)
            elif isinstance(outcome, Exception):
                self._failed(key, state, outcome)

        return done

    def _issued(self, key: TokenKey, state: TokenState, issued: Issued) -> None:
        first = state.issued is None or state.error
        state.issued, state.error = issued, ""
        state.retry.succeeded()
        (log.info if first else log.debug)(
            "token issued pod=%s/%s service_account=%s audience=%s expires_at=%.0f",
            key.namespace,
            key.pod_name,
            key.service_account,
            key.audience or "-",
            issued.expires_at,
        )
        self._report(key, _message(key, token=issued.token, expires_at=issued.expires_at))

    def _failed(self, key: TokenKey, state: TokenState, exc: Exception) -> None:
        state.retry.failed(time.monotonic())
        error = api_message(exc)
        if error != state.error:
            log.warning(
                "token request failed pod=%s/%s service_account=%s audience=%s error=%s",
                key.namespace,
                key.pod_name,
                key.service_account,
                key.audience or "-",
                error,
            )
        state.error = error
        if state.issued is None or self._clock.time() >= state.issued.expires_at:
            self._report(key, _message(key, error=error))


def _message(
    key: TokenKey, token: str = "", expires_at: float = 0.0, error: str = ""
) -> TokenIssued:
    return TokenIssued(
        PodUID(key.pod_uid),
        key.service_account,
        key.audience,
        key.expiration_seconds,
        token=token,
        expires_at=expires_at,
        error=error,
    )
