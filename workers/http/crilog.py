"""Reading a container's log file in the CRI format, as the kubelet's ``ReadLogs``
(``pkg/kubelet/kuberuntime/logs``) does.

Each line of the file is ``<RFC3339Nano time> <stdout|stderr> <P|F> <content>``; ``F``
ends a line (a newline is added back), ``P`` is part of a longer one. ``tailLines``
counts lines of the file from its end; ``sinceTime``/``sinceSeconds`` drop lines written
earlier; ``limitBytes`` cuts the output; ``timestamps`` prefixes each piece with its time.
Lines that do not parse are skipped; an incomplete last line is held back until the
runtime finishes it (or dropped when not following).

Following polls the file (every ``POLL_S``): it goes on while the container instance is
running, and when the log is rotated (the path names a new file) it finishes the old file
and goes on with the new one from its start. Output goes through ``write`` in pieces of
at most ``CHUNK`` bytes; ``write`` waits for the client, so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import calendar
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import BinaryIO

CHUNK = 64 * 1024
POLL_S = 0.25
TAIL_BLOCK = 8 * 1024
_STAMP = re.compile(
    rb"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:\d{2})"
)


@dataclass(frozen=True, slots=True)
class LogOptions:
    follow: bool = False
    tail_lines: int | None = None  # None: the whole file
    limit_bytes: int | None = None
    since_ns: int | None = None  # unix time in nanoseconds
    timestamps: bool = False


@dataclass(frozen=True, slots=True)
class LogLine:
    stamp: bytes
    stamp_ns: int
    stream: bytes
    full: bool
    content: bytes


def stamp_ns(text: bytes) -> int | None:
    """Unix nanoseconds of an RFC 3339 time (with up to nine fractional digits)."""
    match = _STAMP.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7) or b"", match.group(8)
    try:
        seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    if zone not in (b"Z", b"z"):
        sign = 1 if zone[:1] == b"+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds * 1_000_000_000 + int(fraction.ljust(9, b"0") or b"0")


def parse_line(raw: bytes) -> LogLine | None:
    """One line of the file (without its newline); None if it is not in the CRI format."""
    parts = raw.split(b" ", 3)
    if len(parts) < 3:
        return None
    stamp, stream, tag = parts[0], parts[1], parts[2]
    nanos = stamp_ns(stamp)
    if nanos is None or stream not in (b"stdout", b"stderr"):
        return None
    kind = tag.split(b":", 1)[0]
    if kind not in (b"P", b"F"):
        return None
    content = parts[3] if len(parts) == 4 else b""
    return LogLine(stamp, nanos, stream, kind == b"F", content)


def render(line: LogLine, timestamps: bool) -> bytes:
    text = line.content + b"\n" if line.full else line.content
    return line.stamp + b" " + text if timestamps else text


def tail_offset(f: BinaryIO, lines: int) -> int:
    """Where the last ``lines`` lines of the file start (the kubelet's
    FindTailLineStartIndex: newlines counted from the end)."""
    f.seek(0, os.SEEK_END)
    right = f.tell()
    seen = 0
    while right > 0:
        left = max(0, right - TAIL_BLOCK)
        f.seek(left)
        block = f.read(right - left)
        index = len(block)
        while True:
            index = block.rfind(b"\n", 0, index)
            if index < 0:
                break
            seen += 1
            if seen > lines:
                return left + index + 1
        right = left
    return 0


Write = Callable[[bytes], Awaitable[None]]


class LogReader:
    """One read of one log file (``path``), following it if asked while ``running()``."""

    def __init__(self, path: str, options: LogOptions, running: Callable[[], bool]) -> None:
        self._path = path
        self._options = options
        self._running = running
        self._left = options.limit_bytes
        self._tail_left = options.tail_lines if not options.follow else None

    def open(self) -> BinaryIO:
        """The file positioned where reading starts; OSError if it cannot be opened."""
        f = open(self._path, "rb")  # noqa: SIM115 (closed by copy)
        if self._options.tail_lines is not None:
            f.seek(tail_offset(f, self._options.tail_lines))
        return f

    async def copy(self, f: BinaryIO, write: Write) -> None:
        """Everything the options select from ``f`` (from :meth:`open`) to ``write``."""
        self._file = f
        try:
            await self._copy(write)
        finally:
            self._file.close()

    async def _copy(self, write: Write) -> None:
        pending = b""
        while not self._done():
            chunk = self._file.read(CHUNK)
            if chunk:
                pending = await self._emit(pending + chunk, write)
            elif not self._options.follow:
                return
            elif (replacement := self._rotated(self._file)) is not None:
                if pending:
                    await self._emit(pending + b"\n", write)
                self._file.close()
                self._file, pending = replacement, b""
            elif not self._running():
                rest = self._file.read()  # what it wrote before it stopped, then the end
                if not rest:
                    return
                pending = await self._emit(pending + rest, write)
            else:
                await asyncio.sleep(POLL_S)

    def _done(self) -> bool:
        return self._left == 0 or self._tail_left == 0

    def _rotated(self, f: BinaryIO) -> BinaryIO | None:
        """The new file at the path, if the one we read was renamed away and replaced."""
        try:
            now = os.stat(self._path)
        except FileNotFoundError:
            return None
        mine = os.fstat(f.fileno())
        if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            return None
        rest = f.read()
        if rest:  # written before the rename: read it first, check again next turn
            f.seek(-len(rest), os.SEEK_CUR)
            return None
        return open(self._path, "rb")  # noqa: SIM115 (closed by _copy)

    async def _emit(self, data: bytes, write: Write) -> bytes:
        """Write the complete lines in ``data``; return the incomplete rest."""
        out = bytearray()
        start = 0
        while not self._done():
            end = data.find(b"\n", start)
            if end < 0:
                break
            line = parse_line(data[start:end])
            start = end + 1
            if line is None:
                continue
            since = self._options.since_ns
            if since is None or line.stamp_ns >= since:
                out += self._limited(render(line, self._options.timestamps))
            self._count_tail()
            if len(out) >= CHUNK:
                await write(bytes(out))
                out.clear()
        if out:
            await write(bytes(out))
        return data[start:] if not self._done() else b""

    def _count_tail(self) -> None:
        if self._tail_left is not None:
            self._tail_left -= 1

    def _limited(self, data: bytes) -> bytes:
        if self._left is None:
            return data
        data = data[: self._left]
        self._left -= len(data)
        return data
