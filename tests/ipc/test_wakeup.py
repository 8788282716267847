"""The wake-up fd every loop polls: set from any thread or a signal, never lost, never blocking."""

from __future__ import annotations

import os
import select
import signal
import threading

from pkletd.ipc.wakeup import Inbox, Wakeup


def readable(fd: int, timeout: float = 0.0) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


def test_set_wakes_and_clear_rearms() -> None:
    wakeup = Wakeup()
    assert not readable(wakeup.fileno())
    wakeup.set()
    wakeup.set()
    assert readable(wakeup.fileno())
    wakeup.clear()
    assert not readable(wakeup.fileno())
    wakeup.close()


def test_set_never_blocks_on_a_full_pipe_nor_after_close() -> None:
    wakeup = Wakeup()
    for _ in range(200_000):  # far past a pipe's 64 KiB
        wakeup.set()
    wakeup.clear()
    assert not readable(wakeup.fileno())
    wakeup.close()
    wakeup.set()  # a late thread: nothing happens


def test_inbox_hands_over_items_in_order_from_other_threads() -> None:
    inbox: Inbox[int] = Inbox()
    threads = [threading.Thread(target=inbox.put, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert readable(inbox.fileno(), timeout=5)
    assert sorted(inbox.take()) == list(range(50))
    assert not readable(inbox.fileno())
    assert inbox.take() == []
    inbox.close()


def test_a_signal_wakes_the_loop() -> None:
    wakeup = Wakeup()
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        wakeup.on_signals()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert readable(wakeup.fileno(), timeout=5)
    finally:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGUSR1, previous)
        wakeup.close()
