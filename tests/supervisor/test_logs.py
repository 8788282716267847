"""Each process's log file: a file that cannot be written is said once, not a traceback
per line, and the lines lost are counted once it can be written again."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pkletd.supervisor import logs


@pytest.fixture
def root_logger() -> Iterator[None]:
    """``logs.configure`` takes over the root logger: give pytest's back afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), list(root.filters), root.level)
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers, root.filters = saved[0], saved[1]
    root.setLevel(saved[2])


def test_a_full_disk_is_said_once_and_the_lost_lines_counted(
    tmp_path: Path, root_logger: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pleg.log"
    path.symlink_to("/dev/full")  # every write: ENOSPC
    logs.configure("pleg", tmp_path)
    log = logging.getLogger("tests.logs")
    for i in range(3):
        log.info("before line=%d", i)
    said = capsys.readouterr().err
    assert said.count("\n") == 1, said
    assert "pkletd: pleg[" in said
    assert f"cannot write {path}: [Errno 28] No space left on device" in said

    path.unlink()  # space again
    log.info("after")
    lines = path.read_text().splitlines()
    assert [line.split(": ", 2)[-1] for line in lines] == [
        "after",
        f"log file written again path={path} lost_lines=3",
    ]
    assert " WARNING pkletd: pleg[" in lines[1]
    assert capsys.readouterr().err == ""
