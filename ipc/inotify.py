"""A directory watch through the kernel's inotify (ctypes on libc, no library needed).

Shared by the workers that watch a directory (the static pod file source, the plugin
watcher): each drains the events and reads the directory again, so it never depends on
what one event said, only on being woken.
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass
from pathlib import Path

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_WATCH_MASK = (
    0x00000002  # IN_MODIFY
    | 0x00000004  # IN_ATTRIB
    | 0x00000008  # IN_CLOSE_WRITE
    | 0x00000040  # IN_MOVED_FROM
    | 0x00000080  # IN_MOVED_TO
    | 0x00000100  # IN_CREATE
    | 0x00000200  # IN_DELETE
    | 0x00000400  # IN_DELETE_SELF
    | 0x00000800  # IN_MOVE_SELF
)
_GONE = 0x400 | 0x800 | 0x8000  # IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED
_MADE = 0x100 | 0x80  # IN_CREATE, IN_MOVED_TO


@dataclass(frozen=True, slots=True)
class DirEvents:
    """What the pending events said: the watched dir went away; the names made in it
    (created or moved in: a name made anew may have the inode it had before)."""

    gone: bool
    made: frozenset[str]


class Inotify:
    """One inotify instance watching a directory; ``fd`` polls readable on events."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.watching = False

    def watch(self, path: Path) -> bool:
        wd = self._libc.inotify_add_watch(self.fd, str(path).encode(), _WATCH_MASK)
        self.watching = wd >= 0
        return self.watching

    def drain(self) -> bool:
        """Read pending events; True if the watched dir itself went away."""
        return self.read().gone

    def read(self) -> DirEvents:
        """Read pending events."""
        gone = False
        made: set[str] = set()
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return DirEvents(gone, frozenset(made))
            offset = 0
            while offset < len(data):
                _wd, mask, _cookie, length = struct.unpack_from("iIII", data, offset)
                gone = gone or bool(mask & _GONE)
                name = data[offset + 16 : offset + 16 + length].rstrip(b"\0")
                if mask & _MADE and name:
                    made.add(os.fsdecode(name))
                offset += 16 + length

    def close(self) -> None:
        os.close(self.fd)
