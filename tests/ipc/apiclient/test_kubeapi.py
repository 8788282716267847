"""The API client's rate limiter (client-go's token bucket) and its error lines."""

from __future__ import annotations

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.clock import FakeClock


def test_a_burst_goes_at_once_then_requests_are_paced_at_qps() -> None:
    clock = FakeClock(mono=0.0)
    limiter = kubeapi.RateLimiter(qps=5, burst=3, clock=clock)
    for _ in range(3):
        limiter.take()
    assert clock.waits == []
    limiter.take()
    limiter.take()
    assert clock.waits == pytest.approx([0.2, 0.2])  # one token every 1/qps seconds


def test_idle_time_refills_up_to_the_burst_only() -> None:
    clock = FakeClock(mono=0.0)
    limiter = kubeapi.RateLimiter(qps=10, burst=2, clock=clock)
    clock.mono = 100.0  # a long quiet spell refills 2 tokens, not 1000
    for _ in range(3):
        limiter.take()
    assert clock.waits == pytest.approx([0.1])


def test_failures_are_one_line() -> None:
    assert kubeapi.describe(ApiException(status=409, reason="Conflict")) == "HTTP 409 Conflict"
    refused = urllib3.exceptions.MaxRetryError(None, "/api", reason="Connection refused")  # type: ignore[arg-type]
    assert kubeapi.describe(refused) == "cannot reach the API server: Connection refused"
    assert kubeapi.status_of(ApiException(status=410)) == 410
    assert kubeapi.status_of(OSError()) == 0
