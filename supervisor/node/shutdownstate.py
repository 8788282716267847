"""When the last graceful node shutdown started and ended: ``graceful_node_shutdown_state``.

The kubelet keeps these two times in ``<root-dir>/graceful_node_shutdown_state`` (JSON,
``startTime`` and ``endTime`` as Go writes times) and reads them back when it starts, so
``kubelet_graceful_shutdown_start_time_seconds`` and ``..._end_time_seconds`` still say,
after the reboot, how the shutdown before it went. That is all the file is for: a
shutdown is not resumed from it. pkletd writes and reads the same file, so either agent
reads what the other wrote.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pkletd.ipc.bus.messages import MetricFamily
from pkletd.ipc.bus.metricfamily import ALPHA, family

log = logging.getLogger(__name__)

FILE_NAME = "graceful_node_shutdown_state"
GO_ZERO_TIME = "0001-01-01T00:00:00Z"  # how Go writes a time that was never set


@dataclass(frozen=True, slots=True)
class ShutdownTimes:
    """Wall-clock seconds; 0 for a time not set."""

    start: float = 0.0
    end: float = 0.0


def _go_time(seconds: float) -> str:
    if not seconds:
        return GO_ZERO_TIME
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _seconds(text: object) -> float:
    if not isinstance(text, str) or text == GO_ZERO_TIME:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class StateFile:
    def __init__(self, root_dir: Path) -> None:
        self.path = root_dir / FILE_NAME

    def load(self) -> ShutdownTimes:
        """What the file says; nothing set when it is missing or unreadable (logged)."""
        try:
            doc = json.loads(self.path.read_text())
            return ShutdownTimes(_seconds(doc.get("startTime")), _seconds(doc.get("endTime")))
        except FileNotFoundError:
            return ShutdownTimes()
        except (OSError, ValueError, AttributeError) as exc:
            log.error("shutdown state not readable path=%s error=%s", self.path, exc)
            return ShutdownTimes()

    def store(self, times: ShutdownTimes) -> None:
        """Replace the file whole (a temporary file renamed over it); a failure is logged."""
        doc = {"startTime": _go_time(times.start), "endTime": _go_time(times.end)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=self.path.parent)
            with os.fdopen(fd, "w") as out:
                json.dump(doc, out)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(name, 0o644)
            os.replace(name, self.path)
        except OSError as exc:
            log.error("shutdown state not written path=%s error=%s", self.path, exc)


def families(times: ShutdownTimes) -> list[MetricFamily]:
    """The kubelet's two gauges (0 until a shutdown set them)."""
    return [
        family(
            "kubelet_graceful_shutdown_start_time_seconds",
            ALPHA + "Last graceful shutdown start time since unix epoch in seconds",
            "gauge",
            (),
            {(): times.start},
        ),
        family(
            "kubelet_graceful_shutdown_end_time_seconds",
            ALPHA + "Last graceful shutdown end time since unix epoch in seconds",
            "gauge",
            (),
            {(): times.end},
        ),
    ]
