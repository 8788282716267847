"""The logind drop-in that raises ``InhibitDelayMaxSec`` to the shutdown grace period.

logind lets a delay lock hold a shutdown back for at most ``InhibitDelayMaxSec`` (5 s by
default). When that is shorter than the grace period, the kubelet writes
``/etc/systemd/logind.conf.d/99-kubelet.conf`` and has logind reload; pkletd writes the
same file (``--logind-conf-dir`` chooses the directory), so a node that changes agent
keeps one drop-in, not two.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE_NAME = "99-kubelet.conf"


def content(seconds: int) -> str:
    return (
        "# Written by pkletd (the kubelet's graceful node shutdown): logind waits this long\n"
        "# for the node's pods to stop before a shutdown goes on.\n"
        f"[Login]\nInhibitDelayMaxSec={seconds}\n"
    )


def write(directory: Path, seconds: int) -> Path:
    """Write the drop-in whole (a temporary file renamed over it); OSError if it cannot."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE_NAME
    fd, name = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=directory)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(content(seconds))
        os.chmod(name, 0o644)
        os.replace(name, path)
    except OSError:
        Path(name).unlink(missing_ok=True)
        raise
    return path
