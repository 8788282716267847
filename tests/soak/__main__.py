"""``python -m tests.soak``: arguments, the run, the table; exit status 1 if a must-hold
failed (or the run could not finish), 0 otherwise."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from tests.soak import __doc__ as PACKAGE_DOC
from tests.soak.plan import FULL, SHORT, scaled
from tests.soak.report import markdown, verdict
from tests.soak.run import FAULTS, Options, run

SOAK_CONTAINERD_DIR = Path("/tmp/pkletd-ctr-soak")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(PACKAGE_DOC or "").split("\n", 1)[0])
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--short", action="store_true", help="a tenth of the counts, 20 pods")
    form.add_argument("--scale", type=float, help="this fraction of the full counts")
    parser.add_argument("--pods", type=int, help="running pods (full: 90, short: 20)")
    parser.add_argument("--seed", type=int, default=1, help="the faults' random seed")
    parser.add_argument("--time-limit", type=float, help="seconds (default: by the form)")
    parser.add_argument("--only", help=f"comma-separated faults, of: {', '.join(FAULTS)}")
    parser.add_argument(
        "--containerd-dir",
        type=Path,
        default=SOAK_CONTAINERD_DIR,
        help=f"the soak's own containerd (default {SOAK_CONTAINERD_DIR})",
    )
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--keep", action="store_true", help="keep the node's dirs (logs)")
    return parser.parse_args(argv)


def options_of(args: argparse.Namespace) -> Options:
    fraction = 0.1 if args.short else 1.0 if args.scale is None else args.scale
    counts = SHORT if args.short else FULL if args.scale is None else scaled(fraction)
    if args.pods is not None:
        counts = replace(counts, pods=args.pods)
    only = tuple(n for n in (args.only or "").split(",") if n)
    unknown = [n for n in only if n not in FAULTS]
    if unknown:
        raise SystemExit(f"unknown faults: {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    limit = args.time_limit if args.time_limit is not None else 300 + 7200 * fraction
    return Options(counts, args.containerd_dir, args.seed, limit, only)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = options_of(args)
    if args.keep:
        os.environ["PKLETD_KEEP_TMP"] = "1"
    started = time.monotonic()
    rows = run(options)
    table = markdown(rows)
    summary = verdict(rows)
    print(table)
    print(summary)
    if args.markdown is not None:
        took = (time.monotonic() - started) / 60
        command = " ".join(["python -m tests.soak", *(argv if argv is not None else sys.argv[1:])])
        args.markdown.write_text(f"`{command}`: {summary}, in {took:.0f} min\n\n{table}\n")
    return 0 if all(r.held for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
