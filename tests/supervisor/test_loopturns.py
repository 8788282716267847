"""A parent loop turn over a second is logged with what took it; a quick one is not."""

from __future__ import annotations

import logging

import pytest
from pkletd.supervisor import loopturns
from pkletd.supervisor.loopturns import LoopTurns


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(loopturns.time, "monotonic", fake)
    return fake


def turn(clock: Clock, parts: list[tuple[str, float]]) -> LoopTurns:
    turns = LoopTurns()
    turns.begin()
    for part, seconds in parts:
        started = clock.now
        clock.now += seconds
        turns.add(part, started)
    turns.end()
    return turns


def test_a_slow_turn_names_its_slowest_parts(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=loopturns.__name__)
    parts = [("PodsListed", 0.2), ("timers", 0.01), ("control", 1.5), ("PodsListed", 0.3)]
    parts += [("ProbeResult", 0.001)] * 5
    turn(clock, parts)
    [record] = caplog.records
    message = record.getMessage()
    assert "supervisor loop turn took longer than expected took=2.015s" in message
    assert "slowest=control:1.500s/1,PodsListed:0.500s/2,timers:0.010s/1" in message


def test_a_quick_turn_logs_nothing(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=loopturns.__name__)
    turn(clock, [("PodsListed", 0.4), ("timers", 0.5)])
    turn(clock, [("control", 0.9)])  # each turn counts from its own start
    assert caplog.records == []
