"""A private image registry for pull tests: Debian's ``docker-registry`` on 127.0.0.1.

Each ``Registry`` keeps what it needs in a directory of its own under /tmp,
removed by ``stop()``::

    config.yml     the registry's config: listen on 127.0.0.1:PORT, store below
    storage/       blobs and manifests
    htpasswd       with ``users``: their bcrypt hashes, which every request must match
    registry.log   the registry's stdout/stderr

``Registry(port, users={"alice": "s3cret"})`` is a private registry: docker-registry's
``htpasswd`` authentication answers 401 to a request without one of those users' basic
credentials, pulls included. Plain HTTP still: containerd 1.6 sends basic credentials to
a registry its ``hosts.toml`` names with an ``http://`` server (tested).

``push`` uploads an OCI image layout (``images.build_layout``) with the
distribution API over plain HTTP, standard library only: each blob by one
monolithic upload (POST a session, PUT the bytes with their digest), then the
manifest under its tag. The private containerd pulls from the registry once
``PrivateContainerd.allow_plain_http`` names its host.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from email.message import Message
from pathlib import Path

import bcrypt

from tests.harness.containerd import REGISTRY_BIN, HarnessError, tail, wait_for

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
HTTP_TIMEOUT = 60.0
REALM = "pkletd-test"


def registry_config(host: str, storage: Path, htpasswd: Path | None = None) -> str:
    auth = f"auth:\n  htpasswd:\n    realm: {REALM}\n    path: {htpasswd}\n" if htpasswd else ""
    return f"""\
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: {storage}
http:
  addr: {host}
{auth}"""


def htpasswd_lines(users: Mapping[str, str]) -> str:
    """An htpasswd file, bcrypt only as docker-registry wants (cost 4, the least: the
    registry checks the hash on every request)."""
    return "".join(
        f"{name}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()}\n"
        for name, password in users.items()
    )


def basic_auth(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


class Registry:
    """``docker-registry serve`` on ``127.0.0.1:port``, plain HTTP; with ``users``, each
    request must carry one of them (name -> password), and pushes go as the first."""

    def __init__(self, port: int, users: Mapping[str, str] | None = None) -> None:
        self.host = f"127.0.0.1:{port}"
        self.base_dir = Path(tempfile.mkdtemp(prefix="pkletd-registry-", dir="/tmp"))
        self.users = dict(users or {})
        pusher = next(iter(self.users.items()), None)
        self._headers = {"Authorization": basic_auth(*pusher)} if pusher else {}
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.base_dir / "registry.log"

    def start(self, timeout: float = START_TIMEOUT) -> None:
        config = self.base_dir / "config.yml"
        htpasswd = self.base_dir / "htpasswd" if self.users else None
        if htpasswd is not None:
            htpasswd.write_text(htpasswd_lines(self.users))
        config.write_text(registry_config(self.host, self.base_dir / "storage", htpasswd))
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [str(REGISTRY_BIN), "serve", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_for(self._answers, timeout, f"the registry on {self.host} to answer /v2/")
        except HarnessError as exc:
            last = tail(self.log_path)
            self.stop()  # removes the log too
            raise HarnessError(f"{exc}\nlast lines of the registry's log:\n{last}") from None

    def _answers(self) -> bool:
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise HarnessError(f"docker-registry exited with status {self._proc.returncode}")
        request = urllib.request.Request(f"http://{self.host}/v2/", headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the registry and remove its directory."""
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        shutil.rmtree(self.base_dir, ignore_errors=True)

    # --- pushing -----------------------------------------------------------------

    def push(self, repository: str, tag: str, layout: Mapping[str, bytes]) -> str:
        """Upload the one image of an OCI ``layout`` as ``repository:tag``; its manifest digest."""
        descriptor = json.loads(layout["index.json"])["manifests"][0]
        manifest = _blob(layout, descriptor["digest"])
        parts = json.loads(manifest)
        for blob in [parts["config"], *parts["layers"]]:
            self._upload(repository, blob["digest"], _blob(layout, blob["digest"]))
        url = f"http://{self.host}/v2/{repository}/manifests/{tag}"
        self._send("PUT", url, manifest, descriptor["mediaType"])
        return str(descriptor["digest"])

    def _upload(self, repository: str, digest: str, data: bytes) -> None:
        session = self._send("POST", f"http://{self.host}/v2/{repository}/blobs/uploads/")
        location = urllib.parse.urljoin(f"http://{self.host}/", session["Location"])
        separator = "&" if "?" in location else "?"
        query = urllib.parse.urlencode({"digest": digest})
        self._send("PUT", f"{location}{separator}{query}", data, "application/octet-stream")

    def _send(self, method: str, url: str, body: bytes = b"", content_type: str = "") -> Message:
        """One request to the registry (as the pushing user); its reply headers. An error
        status raises, with the body."""
        headers = dict(self._headers, **({"Content-Type": content_type} if content_type else {}))
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as reply:
                return reply.headers
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise HarnessError(f"{method} {url}: HTTP {exc.code}: {detail}") from exc


def _blob(layout: Mapping[str, bytes], digest: str) -> bytes:
    return layout["blobs/sha256/" + digest.removeprefix("sha256:")]
