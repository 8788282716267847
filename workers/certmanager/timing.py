"""When to renew, and how long to wait after a failure, as client-go's certificate manager.

The rotation deadline is NotBefore + lifetime x a uniform fraction in [0.7, 0.9): nodes
whose certificates were issued together do not all renew at once. Failures back off from
2 s, doubling with 10 % jitter for 5 steps, then every 32 s.
"""

from __future__ import annotations

import datetime as dt
import random

BACKOFF_START_S = 2.0
BACKOFF_FACTOR = 2.0
BACKOFF_JITTER = 0.1
BACKOFF_STEPS = 5
BACKOFF_STEADY_S = 32.0


def rotation_deadline(
    not_before: dt.datetime, not_after: dt.datetime, rng: random.Random
) -> dt.datetime:
    lifetime = (not_after - not_before).total_seconds()
    return not_before + dt.timedelta(seconds=lifetime * rng.uniform(0.7, 0.9))


def backoff_s(failures: int, rng: random.Random) -> float:
    """The wait after ``failures`` failures in a row (1 for the first)."""
    if failures > BACKOFF_STEPS:
        return BACKOFF_STEADY_S
    base = BACKOFF_START_S * BACKOFF_FACTOR ** (failures - 1)
    return base * (1 + BACKOFF_JITTER * rng.random())
