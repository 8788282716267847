"""Which registry credentials fit an image, as the kubelet's credential keyring decides.

Each entry is stored under a key made from its location: the scheme dropped, then
``host[:port]`` and the path, where a path of ``/v1/`` or ``/v2/`` (docker's API
roots) or ``/`` counts as none. ``https://index.docker.io/v1/`` is so ``index.docker.io``
and ``registry.example:5000/team`` stays as it is. A location Go's URL parser refuses
(a port that is not a number, a space in the host) is skipped with a warning.

An image is looked up by its repository, normalised as docker names it
(``busybox:1.36`` is ``docker.io/library/busybox``, ``index.docker.io/x/y`` is
``docker.io/x/y``; tag and digest dropped). A key fits the repository when the ports are
the same, the hosts have as many dot-separated labels and each label matches as a glob
(``*.example.com`` fits ``eu.example.com``, not ``example.com``), and the key's path is a
prefix of the repository's. Keys are tried longest first (reverse order, so
``quay.io/team`` before ``quay.io``) and every fitting key's credentials are returned, in
the order they were added: the pull tries them in turn. When none fits an image of the
default registry, ``index.docker.io``'s credentials are used.

``NodeCredentials`` is what the node itself adds after the pod's secrets: its credential
provider plugins (``supervisor/credentialproviders``), or ``NO_NODE_CREDENTIALS``.
"""

from __future__ import annotations

import fnmatch
import logging
import string
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pkletd.supervisor.pods.dockerconfig import Entry

log = logging.getLogger(__name__)

DEFAULT_REGISTRY_KEY = "index.docker.io"
DEFAULT_DOMAIN = "docker.io"
# What Go's URL parser takes in a host besides non-ASCII text (``*`` among them: globs)
HOST_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_.~!$&'()*+,;=:[]<>\"%")


@dataclass(frozen=True, slots=True)
class Credential:
    """One set of credentials for a pull; ``secret`` (or ``provider``, the credential
    provider plugin that gave it) and ``registry`` (its key) name it in logs, and the
    password is never shown."""

    username: str
    password: str = field(repr=False)
    secret: str = ""
    registry: str = ""
    provider: str = ""


class NodeCredentials(Protocol):
    def lookup(self, image: str) -> list[Credential]:
        """The node's credentials to try for ``image`` after the pod's; [] if none."""
        ...


class NoNodeCredentials(NodeCredentials):
    def lookup(self, image: str) -> list[Credential]:
        return []


NO_NODE_CREDENTIALS = NoNodeCredentials()


@dataclass(frozen=True, slots=True)
class _Url:
    labels: tuple[str, ...]  # the host split at its dots
    port: str
    path: str


class Keyring:
    def __init__(self) -> None:
        self._by_key: dict[str, list[Credential]] = {}

    def add(self, secret: str, entries: Iterable[Entry], provider: str = "") -> None:
        """Keep the entries of the pull secret ``secret`` (or of the plugin ``provider``)."""
        for entry in entries:
            key = _key(entry.location)
            if key is None:
                # the location itself stays out of the log: it might carry userinfo
                log.warning(
                    "credential entry ignored secret=%s provider=%s why=registry not a URL",
                    secret,
                    provider,
                )
                continue
            credential = Credential(entry.username, entry.password, secret, key, provider)
            self._by_key.setdefault(key, []).append(credential)

    def lookup(self, image: str) -> list[Credential]:
        """The credentials to try for ``image``, most specific first; [] if none fits."""
        repository = normalised_repository(image)
        found = [
            credential
            for key in sorted(self._by_key, reverse=True)
            if fits(key, repository)
            for credential in self._by_key[key]
        ]
        if not found and repository.startswith(f"{DEFAULT_DOMAIN}/"):
            found = list(self._by_key.get(DEFAULT_REGISTRY_KEY, ()))
        return found


def normalised_repository(image: str) -> str:
    """The image's repository as docker names it in full, without tag or digest."""
    name = image.partition("@")[0]
    if name.rfind(":") > name.rfind("/"):
        name = name[: name.rfind(":")]
    domain, slash, rest = name.partition("/")
    if not slash or not ("." in domain or ":" in domain or domain == "localhost"):
        domain, rest = DEFAULT_DOMAIN, name
    if domain == "index.docker.io":
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in rest:
        rest = f"library/{rest}"
    return f"{domain}/{rest}"


def _key(location: str) -> str | None:
    """The key an entry is stored under, or None if Go would not parse its location."""
    has_scheme = location.startswith(("https://", "http://"))
    parsed = _parse(location if has_scheme else f"https://{location}")
    if parsed is None:
        return None
    host, path = parsed
    if path.startswith(("/v1/", "/v2/")):
        path = path[3:]
    return host if path in ("", "/") else host + path


def parses(schemeless: str) -> bool:
    """Whether Go parses ``https://`` + ``schemeless`` as a URL (a pattern can be used)."""
    return _url(schemeless) is not None


def fits(key: str, repository: str) -> bool:
    """Whether the pattern ``key`` (``host[:port][/path]``, ``*`` globs per host label)
    fits the repository, as the kubelet's ``URLsMatchStr``."""
    pattern, target = _url(key), _url(repository)
    if pattern is None or target is None:
        return False
    return (
        pattern.port == target.port
        and len(pattern.labels) == len(target.labels)
        and target.path.startswith(pattern.path)
        and all(map(fnmatch.fnmatchcase, target.labels, pattern.labels))
    )


def _url(schemeless: str) -> _Url | None:
    parsed = _parse(f"https://{schemeless}")
    if parsed is None:
        return None
    host, path = parsed
    name, port = _split_port(host)
    return _Url(tuple(name.split(".")), port, path)


def _parse(url: str) -> tuple[str, str] | None:
    """A URL's host (with its port) and path; None where Go's ``url.Parse`` fails."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return None
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # a bracket left open
        return None
    host = parts.netloc.rpartition("@")[2]
    if not all(c in HOST_CHARACTERS or ord(c) >= 0x80 for c in host):
        return None
    _, port = _split_port(host)
    if port and not port.isdigit():
        return None
    return host, parts.path


def _split_port(host: str) -> tuple[str, str]:
    """Host and port as Go's ``net.SplitHostPort`` splits them; the whole host, and no port,
    where it cannot (no colon, or too many)."""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return (name, rest[1:]) if rest.startswith(":") else (host, "")
    name, colon, port = host.rpartition(":")
    if not colon or ":" in name:
        return host, ""
    return name, port
