"""The client certificates on disk, as the kubelet's certificate store keeps them.

``<cert-dir>/kubelet-client-<YYYY-MM-DD-HH-MM-SS>.pem`` (``kubelet-server-`` for the
serving pair) holds the certificate chain then
the key (mode 0600, the directory 0755); ``kubelet-client-current.pem`` is a symlink to
the newest. A new pair is linked as ``kubelet-client-updated.pem`` first, then renamed
over the current link, so a reader always finds a whole pair. The key of a request not
signed yet waits in ``kubelet-client.key.tmp``, so a restarted node asks again with it.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

PREFIX = "kubelet-client"
PENDING_KEY = f"{PREFIX}.key.tmp"
STAMP = "%Y-%m-%d-%H-%M-%S"


@dataclass(frozen=True, slots=True)
class Pair:
    path: Path  # the file the current link points at
    not_before: dt.datetime
    not_after: dt.datetime

    def expired(self, now: dt.datetime) -> bool:
        return now >= self.not_after


class Store:
    """``prefix``: ``kubelet-client`` (the client pair) or ``kubelet-server`` (serving)."""

    def __init__(self, directory: Path, prefix: str = PREFIX) -> None:
        self.directory = directory
        self.prefix = prefix

    @property
    def current_path(self) -> Path:
        return self.directory / f"{self.prefix}-current.pem"

    def current(self) -> Pair | None:
        """The pair the current link points at; None if there is none or it is unreadable."""
        try:
            certs = x509.load_pem_x509_certificates(self.current_path.read_bytes())
        except (OSError, ValueError):
            return None
        leaf = certs[0]
        target = self.current_path.resolve()
        return Pair(target, leaf.not_valid_before_utc, leaf.not_valid_after_utc)

    def write(self, cert_pem: bytes, key_pem: bytes, now: dt.datetime) -> Path:
        """Write a new pair and point the current link at it; the pair's file."""
        self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        path = self.directory / f"{self.prefix}-{now.strftime(STAMP)}.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as out:
            out.write(cert_pem.rstrip(b"\n") + b"\n" + key_pem)
        updated = self.directory / f"{self.prefix}-updated.pem"
        updated.unlink(missing_ok=True)
        updated.symlink_to(path.name)
        os.replace(updated, self.current_path)
        return path

    def pending_key(self) -> bytes | None:
        try:
            return (self.directory / PENDING_KEY).read_bytes()
        except OSError:
            return None

    def keep_pending_key(self, key_pem: bytes) -> None:
        self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        path = self.directory / PENDING_KEY
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as out:
            out.write(key_pem)

    def drop_pending_key(self) -> None:
        (self.directory / PENDING_KEY).unlink(missing_ok=True)
