"""Logging, configured once per process: one rotated file per process in the log dir.

Every line carries the process name and pid; messages are fixed phrases with
values as key=value fields, so an operator can grep them.

A log file that cannot be written (its filesystem full, or failing) costs its lines, not
the process: the first failure is said once on stderr, which systemd's journal keeps,
naming the file and the error; the lines are dropped until one can be written again;
then the file gets one line saying how many were lost. (logging's default is a traceback
on stderr for every line, and a stream that keeps the lines it failed to write.)
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


class _LogFile(logging.handlers.RotatingFileHandler):
    """A rotated log file that says once when it cannot be written, then when it can."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, maxBytes=MAX_BYTES, backupCount=BACKUPS)
        self.lost = 0  # lines dropped since the file could last be written
        self._failed = False  # the record being emitted was not written

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)
        if self.lost and not self._failed:
            lost, self.lost = self.lost, 0
            super().emit(_recovered(record, self.baseFilename, lost))

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
            return
        self._failed = True
        if not self.lost:
            name = getattr(record, "processname", "pkletd")
            sys.stderr.write(
                f"pkletd: {name}[{os.getpid()}]: cannot write {self.baseFilename}: {error}; "
                "its lines are lost until it can be written again\n"
            )
        self.lost += 1
        self._drop_stream()

    def _drop_stream(self) -> None:
        """Close the file, unwritten buffer and all; the next line opens it again."""
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass  # the buffer it could not flush: those lines are counted as lost


def _recovered(record: logging.LogRecord, path: str, lost: int) -> logging.LogRecord:
    note = logging.makeLogRecord(record.__dict__)
    note.name, note.levelno, note.levelname = __name__, logging.WARNING, "WARNING"
    note.msg, note.args = "log file written again path=%s lost_lines=%d", (path, lost)
    note.exc_info = note.exc_text = note.stack_info = None
    return note


class _ProcessName(logging.Filter):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.processname = name

    def filter(self, record: logging.LogRecord) -> bool:
        record.processname = self.processname
        return True


def warm(lines: int) -> None:
    """Log ``lines`` lines as a process's log does (record, filter, format, file handler)
    through a handler on ``/dev/null``: run before the fork server is forked, what the
    first lines build is shared by every process (``supervisor/warmup.py``)."""
    handler = _LogFile(Path(os.devnull))
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(_ProcessName("warmup"))
    logger = logging.Logger(__name__)  # not the manager's: no process's log sees it
    logger.addHandler(handler)
    logger.propagate = False
    for line in range(lines):
        logger.info("warming up line=%d", line)
    handler.close()


def configure(process: str, log_dir: Path, to_stderr: bool = False) -> None:
    """Send this process's log to ``<log_dir>/<process>.log`` (and stderr if asked)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for flt in list(root.filters):
        root.removeFilter(flt)
    log_dir.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [_LogFile(log_dir / f"{process}.log")]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    formatter = logging.Formatter(FORMAT)
    name_filter = _ProcessName(process)
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(name_filter)
        root.addHandler(handler)
    level = os.environ.get("PKLETD_LOG_LEVEL", "INFO")
    if logging.getLevelName(root.level) != level:  # a worker keeps the fork server's:
        root.setLevel(level)  # setting it clears every logger's cache, copying their pages
