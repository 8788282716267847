"""The node's IP addresses: ``--node-ip`` checked as the kubelet checks it, and the
Node's ``status.addresses`` as the kubelet chooses them without a cloud provider.

``--node-ip`` is one IP, or a dual-stack pair (one IPv4, one IPv6, in either order;
the first is the primary). ``0.0.0.0`` or ``::`` alone means "choose, preferring that
family". With a usable IP given, the addresses are ``InternalIP`` for each, then
``Hostname``. Without one, the host's IP is, in the kubelet's order: the node name
itself when it is an IP (``--hostname-override=10.0.0.5``); else the first address
the node name resolves to that is not loopback, link-local, multicast or unspecified,
of the preferred family first; else the address of the interface the default route
leaves by. pkletd falls back to 127.0.0.1 where the kubelet gives up (a host with no
route at all), and accepts a loopback ``--node-ip``, which the kubelet refuses when it
updates the node status: one-host test clusters use it.
"""

from __future__ import annotations

import ipaddress
import socket

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# Documentation addresses: connecting a UDP socket to one picks the route, sends nothing.
_PROBES = {4: "192.0.2.1", 6: "2001:db8::1"}


def parse_node_ips(text: str) -> tuple[Address, ...]:
    """``--node-ip``'s addresses; ValueError in the kubelet's words."""
    found: list[Address] = []
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            found.append(ipaddress.ip_address(part.strip()))
        except ValueError:
            raise ValueError(f"could not parse {part!r}") from None
    if len(found) > 2 or (len(found) == 2 and found[0].version == found[1].version):
        raise ValueError("must contain either a single IP or a dual-stack pair of IPs")
    if len(found) == 2 and any(ip.is_unspecified for ip in found):
        raise ValueError("dual-stack node IP cannot include '0.0.0.0' or '::'")
    return tuple(found)


def given_ips(node_ip: str) -> list[str]:
    """The InternalIPs --node-ip names: none for "" or an unspecified ``0.0.0.0`` / ``::``."""
    return [str(ip) for ip in parse_node_ips(node_ip) if not ip.is_unspecified]


def host_ip(node_ip: str, hostname: str) -> str:
    """The node's primary InternalIP (the host IP pods see): --node-ip's first, else the
    host's, chosen as the module says."""
    given = parse_node_ips(node_ip)
    if given and not given[0].is_unspecified:
        return str(given[0])
    try:
        return str(ipaddress.ip_address(hostname))
    except ValueError:
        pass
    version = given[0].version if given else 4
    return _resolved(hostname, version) or _default_route(version) or "127.0.0.1"


def _usable(ip: Address) -> bool:
    return not (ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified)


def _resolved(hostname: str, version: int) -> str | None:
    try:
        infos = socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return None
    usable = [ip for ip in (ipaddress.ip_address(info[4][0]) for info in infos) if _usable(ip)]
    preferred = [ip for ip in usable if ip.version == version]
    chosen = preferred or usable
    return str(chosen[0]) if chosen else None


def _default_route(version: int) -> str | None:
    for family in (version, 10 - version):  # the preferred family, then the other
        kind = socket.AF_INET if family == 4 else socket.AF_INET6
        try:
            with socket.socket(kind, socket.SOCK_DGRAM) as probe:
                probe.connect((_PROBES[family], 9))
                return str(probe.getsockname()[0])
        except OSError:
            continue
    return None
