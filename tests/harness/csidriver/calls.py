"""The driver's record of the calls it got: one JSON line each, appended to a file the
test reads (``CsiDriverProcess.calls``).

A line has ``method`` and ``outcome`` (``OK`` or the gRPC code's name, with ``detail``),
and, where the request has them: ``volume_id``, ``staging_path``, ``target_path``,
``volume_path``, ``readonly``, ``volume_context``, ``publish_context``, ``secret_keys``
(the keys only, never the values), ``fs_type``, ``mount_flags``, ``mount_group``,
``access_mode``, ``block``; a registration status has ``registered`` and ``error``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

# request field -> the line's key
_PLAIN = {
    "volume_id": "volume_id",
    "staging_target_path": "staging_path",
    "target_path": "target_path",
    "volume_path": "volume_path",
    "readonly": "readonly",
    "plugin_registered": "registered",
    "error": "error",
}
_MAPS = {"volume_context": "volume_context", "publish_context": "publish_context"}


def _capability(capability: Any) -> dict[str, Any]:
    mount = capability.mount
    return {
        "fs_type": mount.fs_type,
        "mount_flags": list(mount.mount_flags),
        "mount_group": mount.volume_mount_group,
        "access_mode": type(capability.access_mode).Mode.Name(capability.access_mode.mode),
        "block": capability.HasField("block"),
    }


def describe(method: str, request: Any) -> dict[str, Any]:
    """What a line says of ``request``."""
    fields = request.DESCRIPTOR.fields_by_name
    line: dict[str, Any] = {"method": method}
    line |= {key: getattr(request, name) for name, key in _PLAIN.items() if name in fields}
    line |= {key: dict(getattr(request, name)) for name, key in _MAPS.items() if name in fields}
    if "secrets" in fields:
        line["secret_keys"] = sorted(request.secrets)
    if "volume_capability" in fields and request.HasField("volume_capability"):
        line |= _capability(request.volume_capability)
    return line


class CallLog:
    """Appends lines to ``path`` (kept across restarts), one writer at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.touch()

    def record(self, method: str, request: Any, outcome: str, detail: str = "") -> None:
        line = describe(method, request) | {"outcome": outcome, "detail": detail}
        with self._lock, self.path.open("a") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")


def read(path: Path) -> list[dict[str, Any]]:
    """The lines recorded so far (none when the file is not there yet)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]
