"""The thread that reads the runtime's event stream for PLEG's loop.

One subscription at a time: ``start`` opens one and reads it on a thread of its own,
which hands each event to the loop's inbox and, when the stream ends however it ends,
one ``Lost`` saying why. The loop never blocks on the stream; ``stop`` cancels it. A
``Lost`` of a stream that is no longer the current one (it was stopped, or replaced)
is old news: ``current`` says so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from pkletd.ipc.runtime.events import RuntimeEvent, StreamError
from pkletd.ipc.wakeup import Inbox


class Stream(Protocol):
    """One open subscription (``ipc/runtime/events.py``'s ``Subscription``)."""

    def __iter__(self) -> Iterator[RuntimeEvent]: ...

    def active(self) -> bool: ...

    def cancel(self) -> None: ...


class EventSource(Protocol):
    """Where subscriptions come from (``ipc/runtime/events.py``'s ``RuntimeEvents``)."""

    def subscribe(self) -> Stream: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Lost:
    """The stream ``generation`` ended; ``why`` is the gRPC code and detail."""

    generation: int
    why: str


Item = RuntimeEvent | Lost


class Subscriber:
    def __init__(self, source: EventSource, inbox: Inbox[Item]) -> None:
        self._source = source
        self._inbox = inbox
        self._stream: Stream | None = None
        self._generation = 0

    def start(self) -> None:
        """Open a subscription (stopping any current one) and read it on a new thread."""
        self.stop()
        stream = self._stream = self._source.subscribe()
        reader = threading.Thread(
            target=self._read, args=(stream, self._generation), name="runtime-events", daemon=True
        )
        reader.start()

    def _read(self, stream: Stream, generation: int) -> None:
        why = "the event stream ended"  # also after an unexpected error (traceback on stderr)
        try:
            for event in stream:
                self._inbox.put(event)
        except StreamError as exc:
            why = str(exc)
        finally:
            self._inbox.put(Lost(generation, why))

    def open(self) -> bool:
        """A subscription is open and has not ended."""
        return self._stream is not None and self._stream.active()

    def current(self, lost: Lost) -> bool:
        return self._stream is not None and lost.generation == self._generation

    def ended(self) -> None:
        """The current stream's ``Lost`` was taken: no subscription is open now."""
        self._stream = None
        self._generation += 1

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
            self.ended()

    def close(self) -> None:
        self.stop()
        self._source.close()
