"""The dbus-fast logind client against the stand-in on a private dbus-daemon: the delay,
a lock that is a real file descriptor, logind's own signal taken and a spoofed one (a
broadcast, and one sent to every peer directly) dropped, logind leaving ends the
connection, and no bus is a LogindError naming the address."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbus_fast import Message
from dbus_fast.aio import MessageBus
from pkletd.workers.nodeshutdown import logind
from pkletd.workers.nodeshutdown.logind import LogindError

from tests.harness.logind import LOGIND_PATH, MANAGER, LogindStandIn, PrivateBus

DEADLINE_S = 5.0


@pytest.fixture
def bus() -> Iterator[tuple[PrivateBus, LogindStandIn]]:
    base = Path(tempfile.mkdtemp(prefix="lg-", dir="/tmp"))
    private = PrivateBus(base / "bus").start()
    standin = LogindStandIn(private.address, 7.0, base / "conf")
    try:
        yield private, standin.start()
    finally:
        standin.stop()
        private.stop()
        shutil.rmtree(base, ignore_errors=True)


async def spoof(address: str) -> None:
    """PrepareForShutdown(true) from a peer that is not logind: broadcast, then sent to
    every connection on the bus."""
    peer = await MessageBus(bus_address=address).connect()
    try:
        await peer.send(Message.new_signal(LOGIND_PATH, MANAGER, "PrepareForShutdown", "b", [True]))
        names = await peer.call(
            Message(
                destination="org.freedesktop.DBus",
                path="/org/freedesktop/DBus",
                interface="org.freedesktop.DBus",
                member="ListNames",
            )
        )
        for name in names.body[0]:
            if name.startswith(":") and name != peer.unique_name:
                signal = Message.new_signal(LOGIND_PATH, MANAGER, "PrepareForShutdown", "b", [True])
                signal.destination = name
                await peer.send(signal)
    finally:
        peer.disconnect()
        await peer.wait_for_disconnect()


def test_the_client_talks_to_logind_and_only_logind(
    bus: tuple[PrivateBus, LogindStandIn],
) -> None:
    private, standin = bus

    async def scenario() -> None:
        client = await logind.connect(private.address)
        try:
            signals: list[bool] = []
            client.on_prepare_for_shutdown(signals.append)
            assert await client.inhibit_delay_max_s() == 7.0
            assert not await client.preparing_for_shutdown()
            fd = await client.inhibit("shutdown", "kubelet", "test", "delay")
            os.close(fd)
            await spoof(private.address)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, standin.prepare_for_shutdown, True)
            deadline = loop.time() + DEADLINE_S
            while not signals and loop.time() < deadline:
                await asyncio.sleep(0.02)
            assert signals == [True]  # the spoofed ones came first and were dropped
            assert await client.preparing_for_shutdown()
            await loop.run_in_executor(None, standin.stop)  # logind leaves the bus
            await asyncio.wait_for(client.closed(), DEADLINE_S)
        finally:
            client.close()

    asyncio.run(scenario())
    locks = standin.inhibitors()
    assert len(locks) == 1 and not locks[0].open


def test_no_bus_is_an_error_naming_the_address(tmp_path: Path) -> None:
    address = f"unix:path={tmp_path}/none"
    with pytest.raises(LogindError, match=f"cannot connect to the system bus {address}"):
        asyncio.run(logind.connect(address))
