"""``usageNanoCores``: CPU usage as a rate, from two samples of a cumulative counter.

The kubelet's cAdvisor keeps the samples of its housekeeping and reports the rate between
the last two. pkletd does the same: the http worker's housekeeping (``housekeeping``)
samples every cgroup once per pass, so the first pass that sees a cgroup gives no rate
(the field is left out, as the kubelet leaves it out), each later one the rate since the
previous pass. A sample within ``min_window_s`` of the one it would be compared with (a
pass run early, when the pods became known) gets the previous rate again and is not
kept, so the rate never spans a sliver of time. Counters that went backwards (the cgroup
was made anew under the same name) start over.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class _Sample:
    time: float
    usage_ns: int
    rate: int | None


class CpuRates:
    """The last sample per key (a cgroup name); safe to use from several threads."""

    def __init__(self, min_window_s: float = 1.0) -> None:
        self._min_window_s = min_window_s
        self._last: dict[str, _Sample] = {}
        self._lock = threading.Lock()

    def nano_cores(self, key: str, now: float, usage_ns: int) -> int | None:
        """The rate (CPU-nanoseconds per second) since the key's previous sample, if any."""
        with self._lock:
            previous = self._last.get(key)
            if previous is not None and now - previous.time < self._min_window_s:
                return previous.rate if usage_ns >= previous.usage_ns else None
            rate = None
            if previous is not None and usage_ns >= previous.usage_ns:
                rate = round((usage_ns - previous.usage_ns) / (now - previous.time))
            self._last[key] = _Sample(now, usage_ns, rate)
            return rate

    def keep_only(self, keys: Iterable[str]) -> None:
        """Forget the samples of cgroups no longer asked about."""
        wanted = set(keys)
        with self._lock:
            for key in [k for k in self._last if k not in wanted]:
                del self._last[key]
