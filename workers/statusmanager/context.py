"""What the parts of the status manager share: the API access, the node's name, the
settings, the clock, the server's health and when the loop must wake next."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apiclient.jobs import Jobs
from pkletd.ipc.apiclient.retry import ApiHealth, Retry
from pkletd.ipc.clock import Clock
from pkletd.workers.statusmanager.calls import KubeCalls


@dataclass(frozen=True, slots=True)
class Options:
    """The status manager's settings; the defaults are the kubelet's."""

    kube_api_qps: int
    kube_api_burst: int
    event_qps: int  # eventRecordQPS; 0: no limit
    event_burst: int
    request_timeout: float = kubeapi.REQUEST_TIMEOUT_S
    retry_first: float = 1.0
    retry_max: float = 30.0
    event_queue_limit: int = 1000  # client-go's maxQueuedEvents
    threads: int = 4  # calls about pods at once


@dataclass(frozen=True, slots=True)
class ApiAccess:
    """The calls and the threads they run on: pods, and events (their own rate)."""

    calls: KubeCalls
    event_calls: KubeCalls
    jobs: Jobs
    event_jobs: Jobs

    def close(self) -> None:
        for jobs in (self.jobs, self.event_jobs):
            jobs.close()
        for calls in (self.calls, self.event_calls):
            calls.close()


class Context:
    def __init__(self, api: ApiAccess, node_name: str, options: Options, clock: Clock) -> None:
        self.api = api
        self.node = node_name
        self.options = options
        self.clock = clock
        self.health = ApiHealth()
        self.wake = 0.0  # the loop's next wake-up, lowered by what waits for a time
        self.on_back: list[Callable[[], None]] = []  # run when the server answers again

    def due(self, retry: Retry, now: float) -> bool:
        """``retry`` allows a call now; if not, wake when it will."""
        if retry.due <= now:
            return True
        self.wake = min(self.wake, retry.due)
        return False

    def retry_later(self, retry: Retry) -> None:
        options = self.options
        retry.failed(self.clock.monotonic(), options.retry_first, options.retry_max)

    def ok(self) -> None:
        """A call succeeded: if the server was down, everything that waits goes now."""
        if self.health.succeeded():
            for back in self.on_back:
                back()

    def failed(self, call: str, exc: BaseException) -> None:
        self.health.failed(call, exc)
