"""The tests are laid out as the source is: a folder of ``tests/ipc``, ``tests/supervisor``
or ``tests/workers`` is a package of the source, and no two test modules share a name."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
MIRRORED = ("ipc", "supervisor", "workers")


def test_each_mirrored_folder_is_a_package_of_the_source() -> None:
    folders = [
        d.relative_to(TESTS)
        for top in MIRRORED
        for d in (TESTS / top).rglob("*")
        if d.is_dir() and d.name != "__pycache__" and d.name != "manifests"
    ]
    assert folders  # the walk found the tree
    assert [f for f in folders if not (REPO / f / "__init__.py").is_file()] == []


def test_no_two_test_modules_share_a_name() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
