"""The listening sockets the parent binds for the http worker: bound as asyncio's server
binds one, a taken port logged and left to the worker, and each matched to its listener."""

from __future__ import annotations

import logging
import socket

import pytest
from pkletd.workers.http import Api, Listen, listening


def test_a_listener_is_bound_listening_and_reusable() -> None:
    (sock,) = listening.bind(Listen("127.0.0.1", 0, Api.HEALTHZ))
    with sock:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) == 1
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
        with socket.create_connection(sock.getsockname()[:2], timeout=5):
            accepted, _ = sock.accept()
            accepted.close()


def test_an_ipv6_listener_is_v6_only() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        (sock,) = listening.bind(Listen("::1", 0, Api.READ_ONLY))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with sock:
        assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1


def test_a_taken_port_is_logged_and_the_other_listeners_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    listens = [Listen("127.0.0.1", port, Api.HEALTHZ), Listen("127.0.0.1", 0, Api.READ_ONLY)]
    with taken, caplog.at_level(logging.ERROR):
        bound = listening.bind_each(listens)
    try:
        assert len(bound) == 1 and bound[0].getsockname()[1] != port
        assert (
            f"cannot listen api=healthz address=127.0.0.1:{port} error=[Errno 98] Address "
            "already in use; the http worker retries"
        ) in caplog.messages
    finally:
        for sock in bound:
            sock.close()


def test_each_listener_finds_its_sockets_by_port() -> None:
    healthz = Listen("127.0.0.1", 0, Api.HEALTHZ)
    bound = listening.bind_each([healthz, Listen("127.0.0.1", 0, Api.READ_ONLY)])
    try:
        port = bound[0].getsockname()[1]
        mine = listening.for_listen(bound, Listen("127.0.0.1", port, Api.HEALTHZ))
        assert mine == (bound[0],)
        assert listening.for_listen(bound, Listen("127.0.0.1", 1, Api.KUBELET)) == ()
    finally:
        for sock in bound:
            sock.close()


def test_listeners_on_one_port_and_two_addresses_get_their_own_socket() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    first, second = Listen("127.0.0.1", port, Api.HEALTHZ), Listen("127.0.0.2", port, Api.READ_ONLY)
    bound = listening.bind_each([first, second])
    try:
        assert len(bound) == 2
        assert [s.getsockname()[0] for s in listening.for_listen(bound, first)] == ["127.0.0.1"]
        assert [s.getsockname()[0] for s in listening.for_listen(bound, second)] == ["127.0.0.2"]
    finally:
        for sock in bound:
            sock.close()
