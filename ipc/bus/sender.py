"""What a worker's parts need of the bus: a way to tell the parent something.

``Sender`` is the seam every worker's logic takes; ``WorkerBus`` (``sockets``) is the
real one. ``FakeSender`` keeps what was sent, for tests, and refuses while
``refusing`` is set, as ``WorkerBus`` does (``zmq.Again``) when the parent has stopped
taking messages.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

import zmq
from pkletd.ipc.bus.messages import Message

M = TypeVar("M", bound=Message)


class Sender(Protocol):
    def send(self, message: Message) -> None: ...


class FakeSender(Sender):  # declared, so the type checker proves it fits
    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.refusing = False

    def send(self, message: Message) -> None:
        if self.refusing:
            raise zmq.Again()
        self.sent.append(message)

    def take(self) -> list[Message]:
        """What was sent since the last ``take``."""
        taken, self.sent = self.sent, []
        return taken

    def kinds(self) -> list[str]:
        return [m.kind for m in self.sent]

    def of_type(self, kind: type[M]) -> list[M]:
        return [m for m in self.sent if isinstance(m, kind)]
