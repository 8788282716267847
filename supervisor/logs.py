"""Logging, configured once per process: one rotated file per process in the log dir.

Every line carries the process name and pid; messages are fixed phrases with
values as key=value fields, so an operator can grep them.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 5
FORMAT = "%(asctime)s %(levelname)s pkletd: %(processname)s[%(process)d] %(name)s: %(message)s"


class _ProcessName(logging.Filter):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.processname = name

    def filter(self, record: logging.LogRecord) -> bool:
        record.processname = self.processname
        return True


def configure(process: str, log_dir: Path, to_stderr: bool = False) -> None:
    """Send this process's log to ``<log_dir>/<process>.log`` (and stderr if asked)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for flt in list(root.filters):
        root.removeFilter(flt)
    log_dir.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [
        logging.handlers.RotatingFileHandler(
            log_dir / f"{process}.log", maxBytes=MAX_BYTES, backupCount=BACKUPS
        )
    ]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    formatter = logging.Formatter(FORMAT)
    name_filter = _ProcessName(process)
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(name_filter)
        root.addHandler(handler)
    root.setLevel(os.environ.get("PKLETD_LOG_LEVEL", "INFO"))
