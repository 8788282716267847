"""containerd restarted under pkletd: the pods stay, pkletd is healthy again at once.

Each restart is a SIGTERM to containerd and a new containerd on the same state (the
shims, and so the containers, run on). "Healthy" is what an operator's checks see:
``/healthz`` answers ``ok`` (the supervisor's housekeeping reached the runtime again
and it has been heard from) and every worker is running; timed from the moment the
new containerd's CRI answers. Whether PLEG and the statuses followed is the settle
check's (``Soak.settle``): the crash pods keep dying, and their statuses must match
the runtime again.
"""

from __future__ import annotations

import http.client
import time

from tests.harness.node import wait_for
from tests.soak.context import Soak
from tests.soak.report import Row, seconds

HEALTHY_S = 5.0


def healthz_ok(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/healthz")
        reply = conn.getresponse()
        return reply.status == 200 and reply.read() == b"ok"
    except OSError:
        return False
    finally:
        conn.close()


def healthy(soak: Soak) -> bool:
    return healthz_ok(soak.node.healthz_port) and soak.node.all_running()


def restarts(soak: Soak) -> Row:
    wanted = soak.counts.containerd_restarts
    row = Row("containerd restarted")
    outages: list[float] = []
    recoveries: list[float] = []
    for _ in range(wanted):
        if soak.out_of_time():
            break
        before = soak.fingerprint()
        started = time.monotonic()
        soak.daemon.restart()
        back = time.monotonic()
        outages.append(back - started)
        wait_for("pkletd healthy", lambda: healthy(soak), timeout=60, every=0.05)
        recoveries.append(time.monotonic() - back)
        row.check(
            "pods kept (same containers, none stopped)",
            not soak.fingerprint().restarts_since(before),
        )
    row.count = f"{len(outages)} of {wanted}"
    row.check(f"{wanted} restarts", len(outages) == wanted)
    row.check(f"healthy within {HEALTHY_S:g} s each", max(recoveries, default=0.0) <= HEALTHY_S)
    row.note(f"containerd down (SIGTERM -> CRI answers): {seconds(outages)}")
    row.note(f"CRI answers -> pkletd healthy: {seconds(recoveries)}")
    return row
