"""The stats endpoints served from the housekeeping's last pass: how old a figure may be,
what a request before the first pass gets, which bodies a pass renders at once."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.nodestats.housekeeping import Gathered
from pkletd.ipc.nodestats.podrefs import PodDict
from pkletd.ipc.nodestats.summary import rfc3339
from pkletd.workers.http.stats import NOT_GATHERED, NodeStats
from pkletd.workers.http.statscache import ASKED_S, Body, StatsCache

from tests.ipc.nodestats.nodestats_helpers import POD_CGROUP, Node, api_pod

INTERVAL = 10.0


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path).standard()


def serve(handler: Any, path: str) -> web.Response:
    response: web.Response = asyncio.run(handler(make_mocked_request("GET", path)))
    return response


def test_a_figure_served_is_at_most_one_interval_old(node: Node) -> None:
    clock = FakeClock()
    cache = StatsCache(node.housekeeping(clock), lambda: [api_pod()], clock, INTERVAL)
    stats = NodeStats(cache)
    due = cache.housekeep()
    for _ in range(4):
        while clock.monotonic() < due:  # requests all through the interval
            summary = json.loads(serve(stats.summary, "/stats/summary").body)
            sampled = summary["pods"][0]["cpu"]["time"]
            assert rfc3339(clock.time() - INTERVAL) <= sampled <= rfc3339(clock.time())
            clock.step(INTERVAL / 4)
        due = cache.housekeep()
        assert due == clock.monotonic() + INTERVAL


def test_usage_nano_cores_in_the_summary_is_the_rate_between_passes(node: Node) -> None:
    clock = FakeClock()
    cache = StatsCache(node.housekeeping(clock), lambda: [api_pod()], clock, INTERVAL)
    stats = NodeStats(cache)
    clock.step_to(cache.housekeep())
    node.set_cpu(POD_CGROUP, 2_000_000_000 + 2_500_000_000)  # a quarter core for 10 s
    first = json.loads(serve(stats.summary, "/stats/summary").body)["pods"][0]
    assert "usageNanoCores" not in first["cpu"]  # the counter moved, but no pass saw it
    cache.housekeep()
    clock.step(3)  # a request later in the interval: the same rate, of the same samples
    pod = json.loads(serve(stats.summary, "/stats/summary").body)["pods"][0]
    assert pod["cpu"]["usageNanoCores"] == 250_000_000


def test_only_cpu_and_memory_is_the_full_summary_cut(node: Node) -> None:
    clock = FakeClock()
    cache = StatsCache(node.housekeeping(clock), lambda: [api_pod()], clock, INTERVAL)
    stats = NodeStats(cache)
    cache.housekeep()
    full = json.loads(serve(stats.summary, "/stats/summary").body)
    cut = json.loads(serve(stats.summary, "/stats/summary?only_cpu_and_memory=true").body)
    assert "fs" in full["node"] and "fs" not in cut["node"]
    assert cut["pods"][0]["containers"][0]["cpu"] == full["pods"][0]["containers"][0]["cpu"]
    assert set(cut["pods"][0]) == {"podRef", "startTime", "containers", "cpu", "memory"}


class SlowGatherer:
    """Gathers only once the test lets it."""

    def __init__(self, node: Node) -> None:
        self.release = threading.Event()
        self._housekeeping = node.housekeeping(FakeClock())

    def gather(self, pods: Iterable[PodDict]) -> Gathered:
        self.release.wait(10)
        return self._housekeeping.gather(pods)


def test_a_request_before_the_first_pass_waits_for_it_a_bounded_time(node: Node) -> None:
    gatherer = SlowGatherer(node)
    cache = StatsCache(gatherer, lambda: [api_pod()], first_wait_s=0.05).start()
    try:
        stats = NodeStats(cache)
        response = serve(stats.summary, "/stats/summary")
        assert response.status == 500 and response.text == f"Internal Error: {NOT_GATHERED}\n"
        cache.first_wait_s = 10.0
        threading.Timer(0.1, gatherer.release.set).start()
        summary = json.loads(serve(stats.summary, "/stats/summary").body)
        assert summary["pods"][0]["podRef"]["name"] == "web"
    finally:
        gatherer.release.set()
        cache.close()


def test_a_pass_renders_what_was_asked_for_in_the_last_two_minutes(node: Node) -> None:
    clock = FakeClock()
    cache = StatsCache(node.housekeeping(clock), lambda: [api_pod()], clock, INTERVAL)
    stats = NodeStats(cache)
    cache.housekeep()
    serve(stats.cadvisor_metrics, "/metrics/cadvisor")
    clock.step(INTERVAL)
    cache.housekeep()
    latest = cache.latest
    assert latest is not None and latest.rendered(Body.CADVISOR)
    assert not latest.rendered(Body.RESOURCE) and not latest.rendered(Body.SUMMARY)
    clock.step(ASKED_S)
    cache.housekeep()
    assert cache.latest is not None and not cache.latest.rendered(Body.CADVISOR)


def test_an_unreadable_node_is_a_500_and_a_scrape_error(tmp_path: Path) -> None:
    node = Node(tmp_path)  # no cgroups, no /proc/stat: nothing to read the node from
    (node.proc / "meminfo").unlink()
    (node.proc / "stat").write_text("")
    clock = FakeClock()
    cache = StatsCache(node.housekeeping(clock), lambda: [api_pod()], clock, INTERVAL)
    stats = NodeStats(cache)
    cache.housekeep()
    response = serve(stats.summary, "/stats/summary")
    assert response.status == 500 and "could not be read" in (response.text or "")
    text = serve(stats.resource_metrics, "/metrics/resource").text or ""
    assert "resource_scrape_error 1.0" in text
