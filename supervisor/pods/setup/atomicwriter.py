"""Files of a volume, replaced all at once: the kubelet's ``AtomicWriter``.

The files live in a hidden directory named after the time
(``..2024_05_01_12_00_00.123456789``); ``..data`` is a symlink to it, and every
top-level name the user sees is a symlink into ``..data``. A new version is
written to a new timestamped directory, a ``..data_tmp`` symlink to it is
renamed over ``..data`` (one atomic step for readers), then names that are gone
are unlinked and the old directory is removed. Nothing is written when the
content is the same (modes are not compared, as in the kubelet).
"""

from __future__ import annotations

import os
import posixpath
import random
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = "..data"
NEW_DATA_DIR = "..data_tmp"
MAX_FILE_NAME = 255
MAX_PATH = 4096


@dataclass(frozen=True, slots=True)
class FileProjection:
    data: bytes
    mode: int
    owner: int | None = None  # a uid to own the file (a token's ``FsUser``)


class PayloadError(ValueError):
    """A payload path the writer refuses; the message is the kubelet's."""


def clean_path(path: str) -> str:
    if not path:
        raise PayloadError(f'invalid path: must not be empty: "{path}"')
    if path.startswith("/"):
        raise PayloadError(f"invalid path: must be relative path: {path}")
    if len(path) > MAX_PATH:
        raise PayloadError(f"invalid path: must be less than or equal to {MAX_PATH} characters")
    parts = path.split("/")
    for part in parts:
        if part == "..":
            raise PayloadError(f"invalid path: must not contain '..': {path}")
        if len(part) > MAX_FILE_NAME:
            raise PayloadError(
                f"invalid path: filenames must be less than or equal to {MAX_FILE_NAME} characters"
            )
    if parts[0].startswith("..") and len(parts[0]) > 2:
        raise PayloadError(f"invalid path: must not start with '..': {path}")
    return posixpath.normpath(path)


def _ancestors(path: str) -> set[str]:
    """``a/b/c`` -> {``a/b/c``, ``a/b``, ``a``}: a directory still in use is not removed."""
    found = set()
    while path:
        found.add(path)
        path = posixpath.dirname(path)
    return found


def _old_paths(old_dir: Path) -> set[str]:
    found = set()
    for root, dirs, files in os.walk(old_dir):
        for name in dirs + files:
            found.add(str((Path(root) / name).relative_to(old_dir)))
    return found


def _differs(old_dir: Path, payload: Mapping[str, FileProjection]) -> bool:
    for path, projection in payload.items():
        old = old_dir / path
        if not old.exists() and not old.is_symlink():
            return True
        if old.read_bytes() != projection.data:
            return True
    return False


def _new_timestamp_dir(target: Path) -> Path:
    prefix = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
    while True:
        candidate = target / f"{prefix}{random.randrange(2**31)}"
        try:
            candidate.mkdir(mode=0o700)
        except FileExistsError:
            continue
        candidate.chmod(0o755)  # group and others may walk it, whatever the umask
        return candidate


def write(
    target: Path,
    payload: Mapping[str, FileProjection],
    set_perms: Callable[[Path], None] | None = None,
) -> bool:
    """Project ``payload`` (relative path -> content and mode) into ``target``; True if written."""
    clean = {clean_path(path): projection for path, projection in payload.items()}
    data_link = target / DATA_DIR
    try:
        old_name = os.readlink(data_link)
    except FileNotFoundError:
        old_name = ""
    old_dir = target / old_name if old_name else None
    remove: set[str] = set()
    if old_dir is not None:
        wanted = set().union(*(_ancestors(p) for p in clean)) if clean else set()
        remove = _old_paths(old_dir) - wanted
        if not remove and not _differs(old_dir, clean):
            return False
    new_dir = _new_timestamp_dir(target)
    try:
        for path, projection in clean.items():
            file = new_dir / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(projection.data)
            file.chmod(projection.mode)  # exactly this mode, whatever the umask
            if projection.owner is not None:
                os.chown(file, projection.owner, -1)
        if set_perms is not None:
            set_perms(new_dir)
        temp_link = target / NEW_DATA_DIR
        temp_link.unlink(missing_ok=True)
        temp_link.symlink_to(new_dir.name)
        temp_link.rename(data_link)
    except BaseException:
        shutil.rmtree(new_dir, ignore_errors=True)
        raise
    for top in sorted({p.split("/")[0] for p in clean}):
        visible = target / top
        if not visible.is_symlink():
            visible.symlink_to(f"{DATA_DIR}/{top}")
    for path in remove:
        if "/" not in path:
            (target / path).unlink(missing_ok=True)
    if old_dir is not None:
        shutil.rmtree(old_dir, ignore_errors=True)
    return True
