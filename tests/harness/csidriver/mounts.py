"""The mounts the host-path driver makes: bind mounts through mount(2), and the mount
table (``/proc/self/mountinfo``) to make each call idempotent."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str, path: Path) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what} {path}: {os.strerror(errno)}")


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code in ("040", "011", "012", "134"):
        field = field.replace("\\" + code, chr(int(code, 8)))
    return field


def mount_options(path: Path) -> frozenset[str] | None:
    """The per-mount options (``rw``/``ro``, ...) of the topmost mount at ``path``, or
    None when nothing is mounted there."""
    found = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if _unescape(fields[4]) == str(path):
            found = frozenset(fields[5].split(","))  # later lines are mounted on top
    return found


def is_mounted(path: Path) -> bool:
    return mount_options(path) is not None


def bind(source: Path, target: Path, readonly: bool) -> None:
    """Bind ``source`` at ``target``; a read-only bind takes a remount (the kernel ignores
    MS_RDONLY on the bind itself)."""
    _check(_libc.mount(bytes(source), bytes(target), None, MS_BIND, None), "bind", target)
    if readonly and _libc.mount(None, bytes(target), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None):
        errno = ctypes.get_errno()
        unmount(target)
        raise OSError(errno, f"remount read-only {target}: {os.strerror(errno)}")


def unmount(target: Path) -> None:
    _check(_libc.umount2(bytes(target), 0), "unmount", target)
