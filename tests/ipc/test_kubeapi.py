"""The API client's rate limiter (client-go's token bucket) and its error lines."""

from __future__ import annotations

import urllib3
from kubernetes.client.exceptions import ApiException
from pkletd.ipc.apiclient import kubeapi


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_a_burst_goes_at_once_then_requests_are_paced_at_qps() -> None:
    clock = Clock()
    limiter = kubeapi.RateLimiter(qps=5, burst=3, clock=clock.time, sleep=clock.sleep)
    for _ in range(3):
        limiter.take()
    assert clock.slept == []
    limiter.take()
    limiter.take()
    assert clock.slept == [0.2, 0.2]  # one token every 1/qps seconds


def test_idle_time_refills_up_to_the_burst_only() -> None:
    clock = Clock()
    limiter = kubeapi.RateLimiter(qps=10, burst=2, clock=clock.time, sleep=clock.sleep)
    clock.now = 100.0  # a long quiet spell refills 2 tokens, not 1000
    for _ in range(3):
        limiter.take()
    assert clock.slept == [0.1]


def test_failures_are_one_line() -> None:
    assert kubeapi.describe(ApiException(status=409, reason="Conflict")) == "HTTP 409 Conflict"
    refused = urllib3.exceptions.MaxRetryError(None, "/api", reason="Connection refused")  # type: ignore[arg-type]
    assert kubeapi.describe(refused) == "cannot reach the API server: Connection refused"
    assert kubeapi.status_of(ApiException(status=410)) == 410
    assert kubeapi.status_of(OSError()) == 0
