"""The node's addresses as the kubelet chooses them without a cloud provider."""

from __future__ import annotations

import pytest
from pkletd.supervisor.node import addresses


def test_given_ips_are_the_internal_ips() -> None:
    assert addresses.given_ips("10.0.0.5") == ["10.0.0.5"]
    assert addresses.given_ips("fd00::5,10.0.0.5") == ["fd00::5", "10.0.0.5"]
    assert addresses.given_ips("") == []
    assert addresses.given_ips("::") == []  # "choose, preferring IPv6"


def test_host_ip_is_the_first_given_ip() -> None:
    assert addresses.host_ip("fd00::5,10.0.0.5", "node-a") == "fd00::5"


def test_a_node_name_that_is_an_ip_is_the_host_ip() -> None:
    assert addresses.host_ip("", "10.1.2.3") == "10.1.2.3"


def test_resolution_skips_loopback_and_prefers_the_family(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [("127.0.1.1",), ("fd00::9",), ("10.9.9.9",)]

    def resolve(*_: object, **__: object) -> list[tuple[object, ...]]:
        return [(0, 0, 0, "", (ip, 0)) for (ip,) in answers]

    monkeypatch.setattr(addresses.socket, "getaddrinfo", resolve)
    assert addresses.host_ip("", "node-a") == "10.9.9.9"
    assert addresses.host_ip("::", "node-a") == "fd00::9"


def test_without_resolution_the_default_route_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object, **__: object) -> None:
        raise OSError("no such name")

    monkeypatch.setattr(addresses.socket, "getaddrinfo", fail)
    chosen = addresses.host_ip("", "no-such-node.invalid")
    assert chosen  # the route's source address, or 127.0.0.1 on a host with no route
    assert not addresses.ipaddress.ip_address(chosen).is_unspecified
