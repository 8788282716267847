"""What the worker's loop drives: parts that each own one fd (a reflector inbox or a
job pool's outcomes) and their own timers, and the seam the three ways of following
ConfigMaps and Secrets share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pkletd.ipc.apimodel.references import ObjectKey
from pkletd.ipc.bus.messages import ObjectFetched

Report = Callable[[ObjectKey, ObjectFetched], None]
IDLE_S = 3600.0  # what a part with nothing on a timer answers ``tick`` with


class Part(Protocol):
    def fileno(self) -> int: ...

    def on_readable(self) -> None:
        """Take what the fd says is waiting (on the loop)."""
        ...

    def tick(self, now: float) -> float:
        """Start what is due (monotonic ``now``); when the next thing is due."""
        ...

    def close(self) -> None: ...


class ObjectSource(Part, Protocol):
    """Follows the ConfigMaps and Secrets the pods reference; says what it read through
    the ``Report`` it was built with."""

    def add(self, key: ObjectKey) -> None:
        """A pod references it now: read it, and follow it."""
        ...

    def renew(self, key: ObjectKey) -> None:
        """Another pod references it: read it again if the strategy does."""
        ...

    def drop(self, key: ObjectKey) -> None:
        """No pod references it any more: stop following it."""
        ...
