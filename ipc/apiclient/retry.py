"""When to try a failed call again (``Retry``), and whether the API server is reachable
(``ApiHealth``), which decides what is logged.

A call that failed is retried after 1 s, doubling to 30 s. A failure with no answer,
429 or a 5xx is the server's (transient): the API counts as down until any call
succeeds, and then everything that waits is retried at once. Any other answer (403,
404, 409, 422...) is about the request and is not retried by default. One line is
logged per failure class (the call and the status or error type) until the server is
reachable again, and one when it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pkletd.ipc.apiclient import kubeapi

log = logging.getLogger(__name__)

FIRST_S, MAX_S = 1.0, 30.0


def transient(exc: BaseException) -> bool:
    """A failure to retry: no answer, 408, 429 or a 5xx."""
    status = kubeapi.status_of(exc)
    return status in (0, 408, 429) or status >= 500


@dataclass(slots=True)
class Retry:
    """One object's back-off: ``due`` is when to try again (0: now)."""

    due: float = 0.0
    delay: float = 0.0

    def failed(self, now: float, first: float = FIRST_S, cap: float = MAX_S) -> None:
        self.delay = first if self.delay == 0 else min(cap, self.delay * 2)
        self.due = now + self.delay

    def succeeded(self) -> None:
        self.due = self.delay = 0.0

    def now(self) -> None:
        """Try at once (the server is back), starting the back-off over if it fails."""
        self.succeeded()


class ApiHealth:
    def __init__(self) -> None:
        self.down = False
        self._logged: set[str] = set()

    def failed(self, call: str, exc: BaseException) -> None:
        if transient(exc):
            self.down = True
        failure = f"{call} {kubeapi.status_of(exc) or type(exc).__name__}"
        if failure not in self._logged:
            self._logged.add(failure)
            log.warning("API call failed call=%s error=%s", call, kubeapi.describe(exc))

    def succeeded(self) -> bool:
        """Record a call that worked; True if the server was down until now."""
        if not self.down:
            return False
        self.down = False
        self._logged.clear()
        log.info("API server reachable again")
        return True
