"""etc/pkletd.service as the tests read it: its settings, its command line, a copy
that ``systemd-analyze verify`` can check on this machine.

The unit runs pkletd from a venv at ``INSTALL_PREFIX``; a test that installed pkletd
elsewhere swaps that prefix (on the ExecStart line only) for its own.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harness.node import REPO

UNIT = REPO / "etc" / "pkletd.service"
INSTALL_PREFIX = "/opt/pkletd"
CONFIG = "/var/lib/kubelet/config.yaml"


def unit_settings(text: str | None = None) -> dict[str, list[str]]:
    """'Section.Key' -> values in file order (comments and blank lines skipped)."""
    found: dict[str, list[str]] = {}
    section = ""
    for raw in (UNIT.read_text() if text is None else text).splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return found


def exec_start(text: str | None = None) -> list[str]:
    """The unit's one ExecStart, split as systemd splits it (no shell)."""
    (line,) = unit_settings(text)["Service.ExecStart"]
    return shlex.split(line)


def with_prefix(text: str, prefix: Path) -> str:
    """The unit's text with ExecStart's install prefix swapped for ``prefix``."""
    old = f"ExecStart={INSTALL_PREFIX}/"
    assert text.count(old) == 1, f"{UNIT}: no single ExecStart under {INSTALL_PREFIX}"
    return text.replace(old, f"ExecStart={prefix}/")


def verifiable_copy(
    directory: Path, prefix: Path, text: str | None = None, extra: str = ""
) -> Path:
    """The unit (or ``text``) as ``directory/pkletd.service``, its ExecStart under
    ``prefix`` (where a pkletd exists here) and ``extra`` lines atop [Service]."""
    changed = with_prefix(UNIT.read_text() if text is None else text, prefix)
    if extra:
        changed = changed.replace("[Service]\n", f"[Service]\n{extra}\n", 1)
    directory.mkdir(parents=True, exist_ok=True)
    copy = directory / "pkletd.service"
    copy.write_text(changed)
    return copy


def systemd_verify(unit: Path) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    return subprocess.run(
        [analyze, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_PAGER": ""},
    )


def unit_complaints(result: subprocess.CompletedProcess[str], unit: Path) -> list[str]:
    return [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if str(unit) in line or "pkletd" in line
    ]
