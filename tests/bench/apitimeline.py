"""Where each API pod's start-up went (the cluster figure): per pod, the steps from its
create request to the bench seeing it Running, from four clocks of one machine.

* created: the bench's create request returned;
* added: the supervisor log's ``pod added`` (the api-watcher saw it, the parent took it);
* started: the supervisor log's ``container started`` (its last container);
* patched: the test API server finished the pod's last status PATCH before Running was
  seen (its request log);
* seen: the bench's list first showed it Running and ready.

Each step is printed as p50 and max over the pods, so a step that waits (a queue, a rate
limit, an observer's poll) stands out from one that works.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tests.bench.common import percentile

STEPS = (("created", "added"), ("added", "started"), ("started", "patched"), ("patched", "seen"))
_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ pkletd: \S+ \S+: "
    r"(pod added|container started) .*?pod=[^/ ]+/(\S+)"
)


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def from_log(log_text: str) -> tuple[dict[str, float], dict[str, float]]:
    """When each pod was first added, and when its last container started (time.time())."""
    added: dict[str, float] = {}
    started: dict[str, float] = {}
    for line in log_text.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        when, what, name = _stamp(match[1]), match[2], match[3]
        if what == "pod added":
            added.setdefault(name, when)
        else:
            started[name] = max(started.get(name, when), when)
    return added, started


def last_patches(records: Iterable[Any], seen: dict[str, float]) -> dict[str, float]:
    """The end of each pod's last status PATCH before it was seen Running."""
    found: dict[str, float] = {}
    for record in records:
        name = record.name
        if record.subresource == "status" and record.when <= seen.get(name, 0.0):
            found[name] = max(found.get(name, record.when), record.when)
    return found


def breakdown(clocks: dict[str, dict[str, float]]) -> dict[str, float]:
    """Each step's p50 and max over the pods that have both ends, in seconds."""
    figures: dict[str, float] = {}
    for start, end in STEPS:
        spans = [
            clocks[end][name] - clocks[start][name] for name in clocks[start] if name in clocks[end]
        ]
        if spans:
            figures[f"{start}_to_{end}_p50_s"] = percentile(spans, 50)
            figures[f"{start}_to_{end}_max_s"] = max(spans)
    return figures


def describe(figures: dict[str, float]) -> str:
    return ", ".join(
        f"{start} -> {end} p50 {figures[f'{start}_to_{end}_p50_s'] * 1000:.0f} ms "
        f"max {figures[f'{start}_to_{end}_max_s'] * 1000:.0f} ms"
        for start, end in STEPS
        if f"{start}_to_{end}_p50_s" in figures
    )
