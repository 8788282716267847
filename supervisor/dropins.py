"""The kubelet's drop-in configuration directory (``--config-dir``).

Every file whose name ends in ``.conf``, found walking the directory (and the
directories in it) in lexical order, is a KubeletConfiguration of its own, with
``apiVersion`` and ``kind``, and may hold any subset of the fields. Each is applied
over the configuration so far as a JSON merge patch (RFC 7386), as the kubelet
applies them: a scalar or a list replaces the value before it, a mapping merges key
by key (``featureGates``, ``evictionHard``, ``authentication.webhook``...), and a
null removes the field, so its default holds again. Only the merged result is checked
as a whole; ``config`` checks each file alone first, so an error names its file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SUFFIX = ".conf"


class DropInError(Exception):
    """The directory cannot be walked; the message names it."""


def files(directory: str) -> list[str]:
    """The drop-in files, in the order they apply."""
    root = Path(directory)
    if not root.is_dir():
        what = "is not a directory" if root.exists() else "no such directory"
        raise DropInError(f"--config-dir {directory}: {what}")
    found: list[str] = []
    _walk(root, found)
    return found


def _walk(directory: Path, found: list[str]) -> None:
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as exc:
        raise DropInError(f"--config-dir {directory}: cannot read: {exc.strerror}") from None
    for entry in entries:
        if entry.is_dir():
            _walk(Path(entry.path), found)
        elif entry.name.endswith(SUFFIX):
            found.append(entry.path)


def merge(base: Any, patch: Any) -> Any:
    """``patch`` applied to ``base`` as a JSON merge patch; neither is changed."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge(merged.get(key), value)
    return merged
