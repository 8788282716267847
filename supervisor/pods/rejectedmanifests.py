"""The manifests the static pod sources reject now, for ``pkletd status``.

A source reports a manifest it cannot use (``ManifestRejected``: a file or the URL, and
why; a pod marked deleted among them) and when it reads well again or is gone
(``ManifestAccepted``). A source's worker that gets a snapshot reports its rejections
again, so they are forgotten when it is sent one (``forget``): nothing stale stays.
"""

from __future__ import annotations

from typing import Any


class RejectedManifests:
    def __init__(self) -> None:
        self._found: dict[tuple[str, str], dict[str, Any]] = {}

    def rejected(self, source: str, path: str, reason: str, now: float) -> None:
        before = self._found.get((source, path))
        since = before["since"] if before is not None and before["reason"] == reason else now
        self._found[(source, path)] = {
            "source": source,
            "path": path,
            "reason": reason,
            "since": since,
        }

    def accepted(self, source: str, path: str) -> None:
        self._found.pop((source, path), None)

    def forget(self, source: str) -> None:
        self._found = {key: v for key, v in self._found.items() if key[0] != source}

    def status(self) -> list[dict[str, Any]]:
        return [self._found[key] for key in sorted(self._found)]
