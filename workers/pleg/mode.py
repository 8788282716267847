"""PLEG's mode, and when it subscribes to the runtime's events again.

``evented``: the runtime's event stream flows; each event's object is read at once, and
a relist every ``EVENTED_RELIST_S`` (the kubelet's evented PLEG period) is the safety
net. ``relisting``: no stream (not proven yet, lost, the runtime has no events API, or
events are off): a relist every ``--pleg-relist-period``, and a new subscription after a
back-off, ``RESUBSCRIBE_MIN_S`` doubling to ``RESUBSCRIBE_MAX_S``, back to the minimum
once a subscription lasted ``STABLE_S``.

A subscription is proven by a relist that succeeded after it was opened, while it was
still open: the runtime then answered on the socket and did not refuse the stream (a
runtime without the events API refuses it at once), and that relist caught whatever
happened before the subscription took hold. containerd sends nothing on a new stream
until its first event, so there is no earlier sign.

``ModeSwitch`` is the state machine: ``subscribed`` and ``lost`` are its transitions,
each logged once ("runtime events back", "falling back to relisting"); the worker tells
the parent (``PlegModeChanged``).
"""

from __future__ import annotations

import logging
import math

from pkletd.ipc.bus.messages import PlegMode
from pkletd.ipc.clock import Clock

log = logging.getLogger(__name__)

EVENTED_RELIST_S = 300.0
RESUBSCRIBE_MIN_S = 1.0
RESUBSCRIBE_MAX_S = 30.0
STABLE_S = 10.0
NOT_YET = "runtime events not subscribed yet"
OFF = "runtime events off"

_ALLOWED = {PlegMode.RELISTING: PlegMode.EVENTED, PlegMode.EVENTED: PlegMode.RELISTING}


class ModeSwitch:
    def __init__(self, period: float, events: bool, clock: Clock) -> None:
        self._period = period
        self._clock = clock
        self.mode = PlegMode.RELISTING
        self.reason = NOT_YET if events else OFF
        self.next_subscribe = clock.monotonic() if events else math.inf
        self._opened = 0.0
        self._backoff = RESUBSCRIBE_MIN_S
        self._was_evented = False
        self._fallback_said = False  # since the last evented spell (or the start)
        if not events:
            log.info("runtime events off; relisting period=%gs", period)

    def relist_period(self) -> float:
        return EVENTED_RELIST_S if self.mode is PlegMode.EVENTED else self._period

    def subscribing(self) -> None:
        """A subscription was opened: no other until it is lost."""
        self._opened = self._clock.monotonic()
        self.next_subscribe = math.inf

    def subscribed(self) -> None:
        """The open subscription proved itself."""
        if self.mode is not PlegMode.EVENTED:
            self._become(PlegMode.EVENTED, "")

    def lost(self, why: str) -> None:
        """The subscription ended (or could not be opened): relist, and try again later."""
        now = self._clock.monotonic()
        if now - self._opened >= STABLE_S:
            self._backoff = RESUBSCRIBE_MIN_S
        retry, self._backoff = self._backoff, min(self._backoff * 2, RESUBSCRIBE_MAX_S)
        self.next_subscribe = now + retry
        if self.mode is PlegMode.EVENTED:
            self._become(PlegMode.RELISTING, why)
        elif not self._fallback_said:  # never evented: say once why it relists
            self.reason = why
            self._say_fallback()
        else:
            self.reason = why

    def _become(self, mode: PlegMode, reason: str) -> None:
        if _ALLOWED[self.mode] is not mode:
            raise AssertionError(f"pleg mode {self.mode} cannot become {mode}")
        self.mode, self.reason = mode, reason
        if mode is PlegMode.EVENTED:
            back = "back" if self._was_evented else "subscribed"
            log.info("runtime events %s relist_period=%gs", back, EVENTED_RELIST_S)
            self._was_evented, self._fallback_said = True, False
        else:
            self._say_fallback()

    def _say_fallback(self) -> None:
        log.info(
            "falling back to relisting period=%gs reason=%s resubscribe_in=%.3gs",
            self._period,
            self.reason,
            self.next_subscribe - self._clock.monotonic(),
        )
        self._fallback_said = True
