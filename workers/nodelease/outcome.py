"""What the worker's threads hand back to its loop: one ``Outcome`` per API step."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Source(enum.StrEnum):
    REGISTRATION = "registration"
    STATUS = "status"
    LEASE = "lease"


@dataclass(frozen=True, slots=True)
class Outcome:
    """A step of ``source`` ended: ``error`` is "" if it succeeded; ``written_at`` is the
    wall-clock time of what it wrote (0.0: nothing written); ``node_uid`` is the Node's
    uid when the step learned it; ``conditions`` the Node's conditions (type, status) as
    the step wrote them."""

    source: Source
    error: str = ""
    written_at: float = 0.0
    node_uid: str = ""
    conditions: tuple[tuple[str, str], ...] = ()
