"""One credential provider plugin run as the kubelet's ``execPlugin`` runs it.

``<bin-dir>/<name> <args...>`` is started with the node's environment plus the
provider's ``env`` (which wins), a ``CredentialProviderRequest`` on stdin::

    {"kind": "CredentialProviderRequest", "apiVersion": "<the provider's>", "image": "..."}

and must print a ``CredentialProviderResponse`` of the same ``apiVersion`` on stdout and
exit 0 within a minute (then it is killed)::

    {"kind": "CredentialProviderResponse", "apiVersion": "...", "cacheKeyType": "Registry",
     "cacheDuration": "5m", "auth": {"registry.example": {"username": "u", "password": "p"}}}

Anything else is ``PluginFailed`` with the kubelet's message; a response that cannot be
read says so without quoting it (it may hold credentials). ``Plugin`` is the seam:
``ExecPlugin`` runs the executable, tests give a fake.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Any, Protocol

from pkletd.supervisor.config import parse_duration
from pkletd.supervisor.credentialproviders.providerconfig import Provider
from pkletd.supervisor.pods.dockerconfig import Entry

REQUEST_KIND = "CredentialProviderRequest"
RESPONSE_KIND = "CredentialProviderResponse"
RESPONSE_FIELDS = frozenset({"kind", "apiVersion", "cacheKeyType", "cacheDuration", "auth"})
PLUGIN_TIMEOUT_S = 60.0  # the kubelet's catch-all for every exec plugin
STDERR_SHOWN = 1024  # bytes of a failed plugin's stderr kept in its error
UNREADABLE = "error decoding credential provider plugin response from stdout"


class PluginFailed(Exception):
    """The plugin gave no usable answer; ``str()`` is the kubelet's message."""


@dataclass(frozen=True, slots=True)
class Response:
    cache_key_type: str  # Image, Registry or Global; checked by the caller, as the kubelet
    cache_duration: float | None  # seconds; None: the provider's default
    auth: tuple[Entry, ...]  # registry pattern -> username/password, in the order given


class Plugin(Protocol):
    def run(self, image: str) -> Response: ...


class ExecPlugin(Plugin):
    def __init__(self, provider: Provider, timeout_s: float = PLUGIN_TIMEOUT_S) -> None:
        self._provider = provider
        self._timeout_s = timeout_s

    def run(self, image: str) -> Response:
        provider = self._provider
        failed = f"error execing credential provider plugin {provider.name} for image {image}"
        request = {"kind": REQUEST_KIND, "apiVersion": provider.api_version, "image": image}
        try:
            done = subprocess.run(
                [provider.executable, *provider.args],
                input=json.dumps(request).encode(),
                capture_output=True,
                timeout=self._timeout_s,
                env={**os.environ, **dict(provider.env)},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise PluginFailed(f"{failed}: context deadline exceeded") from None
        except OSError as exc:
            raise PluginFailed(f"{failed}: {exc.strerror}") from None
        if done.returncode != 0:
            stderr = done.stderr[:STDERR_SHOWN].decode(errors="replace").strip()
            raise PluginFailed(f"{failed}: {_exit_status(done.returncode)}: {stderr}")
        return decode(done.stdout, provider.api_version)


def _exit_status(returncode: int) -> str:
    """As Go's ``ExitError`` says it: ``exit status 1``, ``signal: killed``."""
    if returncode < 0:
        return f"signal: {(signal.strsignal(-returncode) or str(-returncode)).lower()}"
    return f"exit status {returncode}"


def decode(data: bytes, api_version: str) -> Response:
    """A plugin's stdout as a response of ``api_version``; ``PluginFailed`` if it is not."""
    try:
        doc = json.loads(data)
    except ValueError:
        raise PluginFailed("error reading GVK from response: not a JSON object") from None
    if not isinstance(doc, dict):
        raise PluginFailed("error reading GVK from response: not a JSON object")
    if doc.get("apiVersion") != api_version:
        raise PluginFailed(
            "apiVersion from credential plugin response did not match expected apiVersion:"
            f"{api_version}, actual apiVersion:{doc.get('apiVersion', '')}"
        )
    if doc.get("kind") != RESPONSE_KIND or not doc.keys() <= RESPONSE_FIELDS:
        raise PluginFailed(UNREADABLE)
    return Response(
        _string(doc.get("cacheKeyType")),
        _duration(doc.get("cacheDuration")),
        _auth(doc.get("auth")),
    )


def _string(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PluginFailed(UNREADABLE)
    return value


def _duration(value: Any) -> float | None:
    """A Go duration; a negative one (Go takes it) expires at once."""
    if value is None:
        return None
    text = _string(value)
    try:
        return -parse_duration(text[1:]) if text.startswith("-") else parse_duration(text)
    except ValueError:
        raise PluginFailed(UNREADABLE) from None


def _auth(value: Any) -> tuple[Entry, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise PluginFailed(UNREADABLE)
    entries = []
    for key, config in value.items():
        if not isinstance(config, dict) or not config.keys() <= {"username", "password"}:
            raise PluginFailed(UNREADABLE)
        username, password = _string(config.get("username")), _string(config.get("password"))
        entries.append(Entry(key, username, password))
    return tuple(entries)
