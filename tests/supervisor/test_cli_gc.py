"""`pkletd status`: the image filesystem against the image GC thresholds, and the last
image and container collections."""

from __future__ import annotations

from typing import Any

from pkletd.supervisor.cli import format_status

STANDALONE = {"name": "n1", "joined": False}


def status(gc: dict[str, Any]) -> dict[str, Any]:
    return {"node": STANDALONE, "workers": [], "pods": [], "gc": gc}


def test_status_shows_the_image_filesystem_and_the_last_collections() -> None:
    gc = {
        "image_fs": {
            "capacity_bytes": 100 * 2**30,
            "available_bytes": 30 * 2**30,
            "usage_percent": 70,
            "high_threshold_percent": 85,
            "low_threshold_percent": 80,
        },
        "image_gc": {
            "at": 877.0,
            "reclaim": False,
            "images": 3,
            "freed_bytes": 5 * 2**20 + 2**19,
            "error": "Failed to garbage collect required amount of images.",
        },
        "container_gc": {
            "at": 988.0,
            "reclaim": False,
            "containers": 4,
            "sandboxes": 1,
            "log_dirs": 2,
            "error": "",
        },
    }
    lines = format_status(status(gc), now=1000.0).splitlines()
    assert lines[2:5] == [
        "image fs: 70% used of 100.0Gi (image GC at 85%, down to 80%)",
        "image GC 2m3s ago: 3 images removed, 5.5Mi freed; "
        "error: Failed to garbage collect required amount of images.",
        "container GC 12s ago: 4 containers, 1 sandboxes, 2 log dirs removed",
    ]


def test_status_before_any_collection() -> None:
    gc = {"image_fs": None, "image_gc": None, "container_gc": None}
    lines = format_status(status(gc), now=1000.0).splitlines()
    assert lines[2:5] == [
        "image fs: not read yet",
        "image GC: not run yet",
        "container GC: not run yet",
    ]
