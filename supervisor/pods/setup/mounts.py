"""mount(2) and umount2(2) for volumes, and what /proc says is mounted."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

MNT_DETACH = 2
MS_BIND = 4096
MS_REC = 16384
MS_SHARED = 1 << 20
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount_tmpfs(target: Path, options: str) -> None:
    _check(
        _libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", 0, options.encode()),
        f"mount -t tmpfs -o {options} tmpfs {target}",
    )


def unmount(target: Path, lazy: bool = False) -> None:
    _check(_libc.umount2(str(target).encode(), MNT_DETACH if lazy else 0), f"umount {target}")


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")


def mounted() -> dict[str, str]:
    """Mount point -> file system type, from this process's mountinfo."""
    found = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        separator = fields.index("-")
        found[_unescape(fields[4])] = fields[separator + 1]
    return found


def fs_type(target: Path) -> str:
    """The type of the file system mounted exactly at ``target``, "" if none is."""
    return mounted().get(str(target), "")


def mounts_under(base: Path) -> list[Path]:
    """Mount points at or below ``base``, deepest first."""
    prefix = str(base)
    points = [p for p in mounted() if p == prefix or p.startswith(prefix + "/")]
    return [Path(p) for p in sorted(points, key=lambda p: p.count("/"), reverse=True)]


def _containing_mount(path: Path) -> list[str]:
    """The mountinfo fields of the mount that holds ``path`` (the longest mount point)."""
    best: list[str] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = _unescape(fields[4])
        inside = point == "/" or str(path) == point or str(path).startswith(point + "/")
        if inside and (not best or len(point) >= len(_unescape(best[4]))):
            best = fields
    return best


def is_shared(path: Path) -> bool:
    fields = _containing_mount(path)
    optional = fields[6 : fields.index("-")] if fields else []
    return any(field.startswith("shared:") for field in optional)


def make_rshared(path: Path) -> bool:
    """The kubelet's ``MakeRShared``: bind-mount ``path`` on itself, rshared, unless it
    already is on a shared mount. True if it had to."""
    if is_shared(path):
        return False
    target = str(path).encode()
    _check(_libc.mount(target, target, None, MS_BIND, None), f"mount --bind {path} {path}")
    _check(
        _libc.mount(None, target, None, MS_SHARED | MS_REC, None), f"mount --make-rshared {path}"
    )
    return True


def is_mountpoint(target: Path) -> bool:
    """Whether something is mounted exactly at ``target`` (a bind mount too, which
    ``os.path.ismount`` misses on the same file system)."""
    return str(target) in mounted()
