"""Figure 5, pod mix start-up: pods with init containers, pkletd against the raw CRI floor.

``--mix-pods`` (100) static hostNetwork pods, each with 2 init containers
(busybox ``true``) and 2 app containers (``sleep`` loops), grace 1, no probes.

* floor: the same containers by bare CRI calls (``tests.bench.floor``), pkletd's
  requests read back from one pod pkletd started (sandbox, all four containers),
  parallelism 10, in the kubelet's order per pod: RunPodSandbox, then each init
  container CreateContainer + StartContainer and wait for it to exit
  (ContainerStatus polled every ``--poll-ms``, 50 ms, from right after
  StartContainer, with a deadline), then the two app containers. Per-pod
  latency: t0 -> its last StartContainer returned.
* pkletd: as for figure 1, t0 -> the first status reply showing the pod Running
  with both app containers running.

``--mix-rounds`` (1) rounds, ABBA as figure 1, best of each by total. Checked
after the pkletd run: one sandbox per pod, four containers per pod (the exited
init containers are kept, as the kubelet keeps them), two running.

Also printed, the "init gap": from an init container's StartContainer returning
to the next container's StartContainer returning, median. The floor's is its
exit poll plus one Create + Start; pkletd's (from its supervisor log's
``container started`` lines, 1 ms resolution) also holds how long pkletd took to
notice the init container exited: the sync that started it polls it for up to one
relist period, as the floor polls; a longer one is seen by PLEG's 1 s relist.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from datetime import datetime
from typing import Any

from tests.bench.common import Context, clean_runtime, ms, progress
from tests.bench.floor import StartRun
from tests.bench.startup import (
    TARGET_STARTUP_RATIO,
    compare,
    floor_builder,
    pod_names,
    run_rounds,
)
from tests.harness.node import BUSYBOX, pod_manifest

INIT_CONTAINERS = 2
APP_CONTAINERS = 2

_STARTED = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .* container started pod=(\S+) container=(\S+) ",
    re.MULTILINE,
)


def mix_manifest(name: str) -> dict[str, Any]:
    """Pod ``name``: 2 init containers (``true``), 2 app containers (sleep loops), no probes."""
    manifest = pod_manifest(name, containers=APP_CONTAINERS)
    manifest["spec"]["initContainers"] = [
        {"name": f"i{i}", "image": BUSYBOX, "command": ["true"]} for i in range(INIT_CONTAINERS)
    ]
    return manifest


def init_gaps(log_text: str, wall_t0: float) -> dict[str, float]:
    """From the supervisor log, per pod and init container: its start -> the next start."""
    order = [*(f"i{i}" for i in range(INIT_CONTAINERS)), "c0"]
    started: dict[str, dict[str, float]] = defaultdict(dict)
    for match in _STARTED.finditer(log_text):
        stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if stamp >= wall_t0 - 1.0:
            started[match[2]].setdefault(match[3], stamp)
    gaps = []
    for containers in started.values():
        for first, then in zip(order, order[1:], strict=False):
            if first in containers and then in containers:
                gaps.append(containers[then] - containers[first])
    return {"log_init_gap_median_s": statistics.median(gaps)} if gaps else {}


def section(ctx: Context) -> None:
    args, address = ctx.args, ctx.daemon.address
    count = args.mix_pods
    build, shaped = floor_builder(address, args, ctx.keep, mix_manifest)
    names = pod_names(count, "m")
    floors, runs = run_rounds(
        ctx,
        "pod mix",
        names,
        build,
        mix_manifest,
        args.mix_rounds,
        containers=INIT_CONTAINERS + APP_CONTAINERS,
        running=APP_CONTAINERS,
        from_log=init_gaps,
    )
    ctx.drop_agent()
    progress("pod mix: removing its pods")
    clean_runtime(address)
    report(ctx, floors, runs, shaped)


def report(
    ctx: Context,
    floors: list[StartRun],
    runs: list[tuple[StartRun, dict[str, float]]],
    shaped: bool,
) -> None:
    args = ctx.args
    shape = f"{INIT_CONTAINERS} init + {APP_CONTAINERS} app containers"
    heading = (
        f"pod mix start-up ({args.mix_pods} pods of {shape}, parallelism {args.parallelism}, "
        f"best of {args.mix_rounds})"
    )
    floor, _, breakdown, found = compare(heading, "mix", floors, runs)
    fx = floor.extra
    what = "pkletd's own, read back" if shaped else "minimal, hand-built"
    gap = breakdown.get("log_init_gap_median_s", math.nan)
    print(
        f"  floor requests: {what}; floor CRI call medians: RunPodSandbox "
        f"{ms(fx['sandbox_call_median_s'])}, CreateContainer {ms(fx['create_call_median_s'])}, "
        f"StartContainer {ms(fx['start_call_median_s'])}, init exit poll "
        f"{ms(fx['init_wait_call_median_s'])}"
    )
    print(
        f"  init gap (init container started -> next container started), median: pkletd "
        f"{ms(gap)} vs floor {ms(fx['init_gap_call_median_s'])}; pkletd RunPodSandbox median "
        f"{ms(breakdown.get('log_sandbox_call_median_s', math.nan))}"
    )
    ctx.figures.update({"mix_pods": args.mix_pods, "mix_rounds": args.mix_rounds, **found})
    ctx.figures["targets_met"]["mix_total_ratio"] = found["mix_total_ratio"] <= TARGET_STARTUP_RATIO
