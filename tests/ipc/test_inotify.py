"""The inotify wrapper on a real directory: names made in it are reported, even one made
anew with the inode it had before, and the directory going away is said."""

from __future__ import annotations

import select
import socket
from pathlib import Path

from pkletd.ipc.inotify import DirEvents, Inotify


def _events(watch: Inotify) -> DirEvents:
    assert select.select([watch.fd], [], [], 5.0)[0], "no inotify event within 5 s"
    return watch.read()


def test_made_names_and_the_directory_going_are_reported(tmp_path: Path) -> None:
    watch = Inotify()
    try:
        assert watch.watch(tmp_path)
        path = tmp_path / "a-reg.sock"
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(path))
        assert _events(watch) == DirEvents(False, frozenset({"a-reg.sock"}))
        path.unlink()
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(path))
        found = _events(watch)
        assert "a-reg.sock" in found.made and not found.gone
        path.unlink()
        tmp_path.rmdir()
        assert _events(watch).gone
    finally:
        watch.close()
