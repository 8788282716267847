"""The short soak in the suite: every fault of the soak at a tenth of its count, on 20
pods, each must-hold asserted (``python -m tests.soak --short``, about three minutes).

It runs its own containerd, next to the session's (``<PKLETD_TEST_CONTAINERD_DIR>-soak``):
the soak restarts its containerd, which the session's other tests must not see.
"""

from __future__ import annotations

import pytest

from tests.conftest import CONTAINERD_TEST_DIR
from tests.soak.plan import SHORT
from tests.soak.report import markdown, verdict
from tests.soak.run import Options, run

pytestmark = pytest.mark.slow

SOAK_CONTAINERD_DIR = CONTAINERD_TEST_DIR.with_name(f"{CONTAINERD_TEST_DIR.name}-soak")
TIME_LIMIT_S = 600.0


def test_the_short_soak_holds_every_must_hold() -> None:
    rows = run(Options(SHORT, SOAK_CONTAINERD_DIR, time_limit=TIME_LIMIT_S))
    assert all(row.held for row in rows), f"{verdict(rows)}\n{markdown(rows)}"
