"""What a log file gained since a point: the lines a fault made pkletd write."""

from __future__ import annotations

import re
from pathlib import Path

STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")


class LogTail:
    """The text written to ``path`` since this was made (the file only grows meanwhile)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = path.stat().st_size
        self.text = ""

    def read(self) -> str:
        with self._path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        self._offset += len(chunk)
        self.text += chunk.decode(errors="replace")
        return self.text

    def forged(self) -> list[str]:
        """Lines that are not one of pkletd's (a timestamp first), and NULs."""
        lines = self.read().splitlines()
        return [line[:80] for line in lines if not STAMP.match(line) or "\0" in line]
