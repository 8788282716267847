"""``kubelet``: pkletd under the kubelet's name takes the kubelet's command line.

It runs when pkletd is started as ``kubelet`` (the ``kubelet`` console script, or the
``pkletd`` script through a link of that name), as kubeadm's systemd drop-in starts
``/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS ... $KUBELET_EXTRA_ARGS``. No subcommand:
the flags are ``pkletd start``'s (one table, ``config.add_flags``), with the kubelet's
forms (``--x=v``, ``--x v``, a bool alone or ``--x=false``; the last of a flag given
twice wins, a map flag's values add up). No abbreviations: an unknown flag or a word
that is not a flag's value is the kubelet's error, exit 2. ``--version`` prints
``Kubernetes v1.32.0-pkletd.<pkletd's version>``.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from pkletd.supervisor import cli, config


class BadCommandLine(Exception):
    """argparse's complaint (a flag without its value), raised instead of exiting."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BadCommandLine(message)


def parser() -> argparse.ArgumentParser:
    found = _Parser(
        prog="kubelet",
        allow_abbrev=False,
        description="pkletd, a Kubernetes node agent, with the kubelet's command line.",
    )
    found.add_argument(
        "--version", nargs="?", const="true", default=None, metavar="BOOL",
        help="print the version and exit",
    )  # fmt: skip
    config.add_flags(found)
    return found


def version_line() -> str:
    from importlib.metadata import version

    from pkletd.supervisor.node.facts import KUBELET_VERSION

    return f"Kubernetes {KUBELET_VERSION}.{version('pkletd')}"


def _unknown(word: str) -> str:
    if word.startswith("--"):
        return f"failed to parse kubelet flag: unknown flag: {word.split('=', 1)[0]}"
    if word.startswith("-") and len(word) > 1:
        return f"failed to parse kubelet flag: unknown shorthand flag: {word[1]!r} in {word}"
    return f"unknown command {word}"


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, or BadCommandLine with the kubelet's message."""
    try:
        args, rest = parser().parse_known_args(argv)
    except BadCommandLine as exc:
        raise BadCommandLine(f"failed to parse kubelet flag: {exc}") from None
    if rest:
        raise BadCommandLine(_unknown(rest[0]))
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
    except BadCommandLine as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    if args.version is not None and args.version.lower() not in ("false", "0", "f"):
        print(version_line())
        return 0
    return cli.start(args)


if __name__ == "__main__":
    sys.exit(main())
