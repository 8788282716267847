"""The node's resolver file (``resolvConf``), read as the kubelet reads it.

``read`` is the kubelet's ``parseResolvConf``: at most 10 MiB; ``nameserver`` lines
accumulate, the last ``search`` line wins (each path without one trailing dot), the
last ``options`` line wins; comment lines are skipped and other keywords ignored. A
``nameserver`` line without an address is an error, and so is a file that cannot be
read: the kubelet then creates no sandbox for the pod. ``limits_problem`` is its
``CheckLimitsForResolvConf``, the node's warning about a search line pods would cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from pkletd.ipc.apimodel.dnsspec import MAX_SEARCH_CHARS, MAX_SEARCHES

MAX_BYTES = 10 * 2**20
MAX_SEARCH_LENGTH = 253  # a longer search path makes some resolvers (glibc 2.28) abort
CLUSTER_SEARCHES = 3  # <ns>.svc.<domain>, svc.<domain>, <domain>


class ResolvConfError(Exception):
    """The node's file cannot be used; the message is the kubelet's error."""


@dataclass(frozen=True, slots=True)
class Resolver:
    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


def parse(text: str) -> Resolver:
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    empty_server = False
    for line in text.split("\n"):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] == "nameserver":
            if len(fields) < 2:
                empty_server = True
            else:
                servers.append(fields[1])
        elif fields[0] == "search":
            searches = [path.removesuffix(".") for path in fields[1:]]
        elif fields[0] == "options":
            options = fields[1:]
    if empty_server:
        raise ResolvConfError("nameserver list is empty ")
    return Resolver(tuple(servers), tuple(searches), tuple(options))


def read(path: str) -> Resolver:
    """The file's resolver; no file ("") is an empty one."""
    if not path:
        return Resolver()
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ResolvConfError(f"open {path}: {go_errno_text(exc)}") from exc
    if len(data) > MAX_BYTES:
        raise ResolvConfError("the read limit is reached")
    return parse(data.decode(errors="replace"))


def go_errno_text(exc: OSError) -> str:
    """An errno's text as Go prints it ("no such file or directory")."""
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


def limits_problem(path: str, cluster_domain: str) -> str | None:
    """What the kubelet warns the node about its file at start, if anything: a search
    line longer than pods can take (room is kept for the cluster's three paths)."""
    try:
        searches = read(path).searches
    except ResolvConfError as exc:
        return str(exc)
    most = MAX_SEARCHES - (CLUSTER_SEARCHES if cluster_domain else 0)
    if len(searches) > most:
        return (
            f"Resolv.conf file '{path}' contains search line consisting of more than "
            f"{most} domains!"
        )
    if any(len(search) > MAX_SEARCH_LENGTH for search in searches):
        return (
            f'Resolv.conf file "{path}" contains a search path which length is more than '
            f"allowed {MAX_SEARCH_LENGTH} chars!"
        )
    if len(" ".join(searches)) > MAX_SEARCH_CHARS:
        return (
            f"Resolv.conf file '{path}' contains search line which length is more than "
            f"allowed {MAX_SEARCH_CHARS} chars!"
        )
    return None
