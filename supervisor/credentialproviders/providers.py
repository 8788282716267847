"""The node's credentials for an image from its credential provider plugins, as the
kubelet's ``pluginProvider.provide`` and ``externalCredentialProviderKeyring`` give them.

A pull asks every provider whose ``matchImages`` fit the image (its repository, as
``keyring.normalised_repository`` names it: ``docker.io/library/busybox``, no tag).
Each answers from its cache or runs its plugin; pulls of one image that ask at once
share one run. A plugin that fails, or answers with a ``cacheKeyType`` other than
``Image``, ``Registry`` or ``Global``, is logged and gives nothing: the pull goes on
with the other credentials, or none. An answer is kept for its ``cacheDuration``, or
the provider's ``defaultCacheDuration`` when it names none; a duration of 0 keeps it not
at all. Every provider's ``auth`` entries go into one keyring (the earlier provider's
first on the same key), which picks the credentials for the image as a pull secret's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.supervisor.credentialproviders.cache import AnswerCache, CacheKeyType, cache_key
from pkletd.supervisor.credentialproviders.execplugin import (
    ExecPlugin,
    Plugin,
    PluginFailed,
    Response,
)
from pkletd.supervisor.credentialproviders.providerconfig import Provider
from pkletd.supervisor.pods.dockerconfig import Entry
from pkletd.supervisor.pods.keyring import (
    Credential,
    Keyring,
    NodeCredentials,
    fits,
    normalised_repository,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Run:
    done: threading.Event = field(default_factory=threading.Event)
    response: Response | None = None
    error: PluginFailed | None = None


class _SharedRuns:
    """One run of the plugin for the pulls of one image that ask while it runs."""

    def __init__(self) -> None:
        self._running: dict[str, _Run] = {}
        self._lock = threading.Lock()

    def run(self, image: str, plugin: Callable[[str], Response]) -> Response:
        with self._lock:
            current = self._running.get(image)
            leads = current is None
            if current is None:
                current = self._running[image] = _Run()
        if leads:
            try:
                current.response = plugin(image)
            except PluginFailed as exc:
                current.error = exc
            finally:
                with self._lock:
                    del self._running[image]
                current.done.set()
        current.done.wait()
        if current.error is not None:
            raise current.error
        assert current.response is not None
        return current.response


class PluginProvider:
    """One provider: its patterns, its plugin and its cache."""

    def __init__(self, config: Provider, plugin: Plugin, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self._plugin = plugin
        self._cache = AnswerCache(clock)
        self._runs = _SharedRuns()

    def serves(self, repository: str) -> bool:
        return any(fits(pattern, repository) for pattern in self.config.match_images)

    def provide(self, repository: str) -> tuple[Entry, ...]:
        """The provider's auth entries for the repository; () if it serves none or fails."""
        if not self.serves(repository):
            return ()
        cached = self._cache.get(repository)
        if cached is not None:
            return cached
        try:
            response = self._runs.run(repository, self._plugin.run)
        except PluginFailed as exc:
            log.error(
                "credential provider failed provider=%s image=%s error=%s",
                self.config.name,
                repository,
                exc,
            )
            return ()
        if response.cache_key_type not in tuple(CacheKeyType):
            log.error(
                "credential provider failed provider=%s image=%s error=credential provider "
                'plugin did not return a valid cacheKeyType: "%s"',
                self.config.name,
                repository,
                response.cache_key_type,
            )
            return ()
        duration = response.cache_duration
        if duration is None:
            duration = self.config.default_cache_duration
        if duration != 0:
            key = cache_key(CacheKeyType(response.cache_key_type), repository)
            self._cache.put(key, response.auth, duration)
        return response.auth


class CredentialProviders(NodeCredentials):
    def __init__(self, providers: Sequence[PluginProvider]) -> None:
        self._providers = tuple(providers)

    @classmethod
    def of(cls, configs: Sequence[Provider], clock: Clock = SYSTEM_CLOCK) -> CredentialProviders:
        return cls([PluginProvider(config, ExecPlugin(config), clock) for config in configs])

    def lookup(self, image: str) -> list[Credential]:
        repository = normalised_repository(image)
        ring = Keyring()
        for provider in self._providers:
            ring.add("", provider.provide(repository), provider=provider.config.name)
        return ring.lookup(image)
