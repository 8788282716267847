"""``python -m tests.bench``: arguments, the figures in order, the final JSON line."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bench import __doc__ as PACKAGE_DOC
from tests.bench import (
    cluster,
    kubectlexec,
    kubeletapi,
    memory,
    plegevents,
    podmix,
    proberload,
    restarts,
    scale,
    startup,
    status,
    storage,
)
from tests.bench.common import (
    PARALLELISM,
    Context,
    bytecode_cache,
    clean_runtime,
    progress,
)
from tests.harness.containerd import PrivateContainerd, ensure_installed
from tests.harness.node import dump_logs

BENCH_CONTAINERD_DIR = Path("/tmp/pkletd-ctr-bench")
STANDALONE = {
    "podmix": podmix.section,
    "proberload": proberload.section,
    "cluster": cluster.section,
    "kubeletapi": kubeletapi.section,
    "exec": kubectlexec.section,
    "pleg": plegevents.section,
    "storage": storage.section,
    "scale": scale.section,
    "restarts": restarts.standalone,
}
STATUS_POLL_MS = 50  # each status request costs the supervisor ~2 ms with 100 pods: poll gently


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(PACKAGE_DOC or "").split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2, help="floor/pkletd start-up rounds")
    parser.add_argument(
        "--kills", type=int, default=5, help="SIGKILLs per worker (each waits ~10 s)"
    )
    parser.add_argument(
        "--http-kills", type=int, default=20, help="SIGKILLs of http, healthz in a loop"
    )
    parser.add_argument("--parallelism", type=int, default=PARALLELISM)
    parser.add_argument(
        "--poll-ms",
        type=float,
        default=STATUS_POLL_MS,
        help="status poll period during start-up (and the floor's init exit poll)",
    )
    parser.add_argument(
        "--floor-shape",
        choices=("pkletd", "minimal"),
        default="pkletd",
        help="the floor's requests: pkletd's own (read back), or the minimal hand-built ones",
    )
    parser.add_argument("--mix-pods", type=int, default=100, help="pods of the pod-mix figure")
    parser.add_argument("--mix-rounds", type=int, default=1, help="floor/pkletd pod-mix rounds")
    parser.add_argument("--probe-pods", type=int, default=110, help="pods of the prober figure")
    parser.add_argument(
        "--steady-s", type=float, default=60.0, help="the cluster figure's steady-state window"
    )
    parser.add_argument(
        "--probe-window", type=float, default=30.0, help="prober measurement window, seconds"
    )
    parser.add_argument("--api-pods", type=int, default=110, help="pods of the kubelet API figure")
    parser.add_argument(
        "--api-requests", type=int, default=200, help="requests to each kubelet API endpoint"
    )
    parser.add_argument("--exec-runs", type=int, default=20, help="kubectl exec round trips")
    parser.add_argument("--pleg-pods", type=int, default=110, help="pods of the PLEG figure")
    parser.add_argument("--pleg-exits", type=int, default=200, help="container exits, each way")
    parser.add_argument("--pleg-batch", type=int, default=20, help="exits of one batch")
    parser.add_argument(
        "--pleg-spread", type=float, default=4.0, help="a batch's kills spread over, seconds"
    )
    parser.add_argument(
        "--pleg-window", type=float, default=30.0, help="PLEG steady CPU window, seconds"
    )
    parser.add_argument(
        "--pleg-poll-ms", type=float, default=15.0, help="reads of CRI, status, /pods in turn"
    )
    parser.add_argument(
        "--csi-pods", type=int, default=10, help="pods of one batch of the storage figure"
    )
    parser.add_argument("--csi-rounds", type=int, default=2, help="storage batches, each way")
    parser.add_argument(
        "--scale-sizes", type=int, nargs="+", default=[50, 110, 250], help="pods, each size"
    )
    parser.add_argument(
        "--scale-window", type=float, default=20.0, help="scale: steady CPU window, seconds"
    )
    parser.add_argument(
        "--scale-requests", type=int, default=30, help="scale: requests to each endpoint"
    )
    parser.add_argument(
        "--scale-status-runs", type=int, default=10, help="scale: pkletd status runs"
    )
    parser.add_argument(
        "--containerd-dir",
        type=Path,
        default=BENCH_CONTAINERD_DIR,
        help="the bench's own containerd (never share one with tests or another bench)",
    )
    parser.add_argument("--keep", action="store_true", help="keep pkletd's temp dirs (logs)")
    parser.add_argument(
        "--only",
        choices=sorted(STANDALONE),
        help="run just this figure (one that needs no other figure's pods)",
    )
    return parser.parse_args(argv)


def bench(ctx: Context) -> None:
    ctx.figures["targets_met"] = {}
    took: dict[str, float] = ctx.figures.setdefault("section_seconds", {})

    def run(name: str, section: Callable[[Context], None]) -> None:
        t0 = time.monotonic()
        section(ctx)
        took[name] = time.monotonic() - t0
        progress(f"{name}: {took[name]:.0f} s")

    try:
        if ctx.args.only:
            run(ctx.args.only, STANDALONE[ctx.args.only])
            return
        run("startup", startup.section)  # leaves its last pkletd running, with its pods
        run("restarts", restarts.section)
        run("status", status.section)
        run("memory", memory.section)
        ctx.drop_agent()
        clean_runtime(ctx.daemon.address)
        run("podmix", podmix.section)
        run("proberload", proberload.section)
        clean_runtime(ctx.daemon.address)
        run("cluster", cluster.section)
        clean_runtime(ctx.daemon.address)
        run("kubeletapi", kubeletapi.section)
        clean_runtime(ctx.daemon.address)
        run("exec", kubectlexec.section)
        clean_runtime(ctx.daemon.address)
        run("pleg", plegevents.section)
        clean_runtime(ctx.daemon.address)
        run("storage", storage.section)
    except BaseException:
        if ctx.agent is not None:
            dump_logs(ctx.agent)
            ctx.keep = True
        raise
    finally:
        ctx.drop_agent()
        shutil.rmtree(ctx.scratch, ignore_errors=True)


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None, so the JSON line is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_installed()
    daemon = PrivateContainerd(args.containerd_dir)
    figures: dict[str, Any] = {}
    code = 0
    started = time.monotonic()
    try:
        progress(f"starting containerd under {args.containerd_dir}")
        daemon.start()
        clean_runtime(daemon.address)  # a reused daemon may hold pods of an aborted run
        with bytecode_cache():
            keep = args.keep or os.environ.get("PKLETD_KEEP_TMP") == "1"
            scratch = Path(tempfile.mkdtemp(prefix="pk-bench-", dir="/tmp"))
            bench(Context(daemon, args, figures, scratch, keep))
    except BaseException as exc:
        traceback.print_exc()
        figures["error"] = f"{type(exc).__name__}: {exc}"
        code = 1
    finally:
        try:
            clean_runtime(daemon.address)
            daemon.stop()
        except Exception as exc:  # report, but keep the figures
            traceback.print_exc()
            figures.setdefault("error", f"stopping containerd: {exc}")
            code = 1
    figures["bench_seconds"] = time.monotonic() - started
    print(json.dumps(finite(figures), sort_keys=True), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
