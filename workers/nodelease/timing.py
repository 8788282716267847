"""Time for the node-lease worker: back-off, and the API's time formats.

The worker's threads ask ``pkletd.ipc.clock.Clock`` for time and wait on it (on a stop
event, so a worker that is closing never sleeps on). ``Backoff`` is the kubelet's
doubling with a cap. The formats are the API's: ``rfc3339`` for ``metav1.Time`` (whole
seconds), ``micro_time`` for a Lease's ``renewTime`` (``metav1.MicroTime``), and
``go_duration`` for durations in messages, as Go's ``time.Duration.String()`` writes them.
"""

from __future__ import annotations

import datetime as dt


class Backoff:
    """``first`` doubling up to ``cap``: each ``next()`` is the next wait."""

    def __init__(self, first: float, cap: float) -> None:
        self._next = first
        self._cap = cap

    def next(self) -> float:
        wait = min(self._next, self._cap)
        self._next = min(self._next * 2, self._cap)
        return wait


def _utc(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def rfc3339(seconds: float) -> str:
    """``metav1.Time`` as JSON: whole seconds, UTC."""
    return _utc(int(seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(seconds: float) -> str:
    """``metav1.MicroTime`` as JSON: RFC 3339 with microseconds, UTC."""
    return _utc(seconds).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """Seconds of an RFC 3339 time (either form above); 0.0 if it is not one."""
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def go_duration(seconds: float) -> str:
    """Go's ``Duration.String()`` (``3m0s``, ``3m5.25s``, ``150ms``), to the millisecond."""
    millis = round(seconds * 1000)
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, frac = divmod(rest, 1000)
    text = f"{whole}.{frac:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text
