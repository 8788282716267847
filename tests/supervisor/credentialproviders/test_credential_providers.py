"""The node's credentials from its plugins, as the kubelet's plugin provider gives them:
only for the images a provider's matchImages fit, cached by cacheKeyType for
cacheDuration (or the default) on a fake clock, one run for pulls that ask at once, a
failing plugin logged and skipped; and in a pull, tried after the pod's pull secrets."""

from __future__ import annotations

import logging
import threading

import pytest
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.runtime.cri import RegistryAuth
from pkletd.supervisor.credentialproviders.cache import PURGE_INTERVAL_S, AnswerCache
from pkletd.supervisor.credentialproviders.execplugin import PluginFailed, Response
from pkletd.supervisor.credentialproviders.fakeplugin import FakePlugin
from pkletd.supervisor.credentialproviders.providerconfig import Provider
from pkletd.supervisor.credentialproviders.providers import CredentialProviders, PluginProvider
from pkletd.supervisor.pods.dockerconfig import Entry
from pkletd.supervisor.pods.images import ImagePuller
from pkletd.supervisor.pods.keyring import Credential, normalised_repository
from pkletd.supervisor.pods.podmetrics import PodMetrics

from tests.supervisor.credentialproviders.plugin_helpers import V1
from tests.supervisor.pods.test_image_pull_secrets import IMAGE, REFUSED, REGISTRY, Node, pod

AUTH = (Entry(REGISTRY, "robot", "t0ken"),)


def node_provider(
    plugin: FakePlugin, clock: FakeClock, *patterns: str, default_s: float = 300.0
) -> PluginProvider:
    config = Provider("creds", "/bin/creds", patterns or (REGISTRY,), default_s, V1)
    return PluginProvider(config, plugin, clock)


@pytest.mark.parametrize(
    ("pattern", "image", "served"),
    [
        ("registry.example:5000", IMAGE, True),
        ("registry.example", IMAGE, False),  # the port must be the same
        ("*.example:5000", IMAGE, True),
        ("*.example:5000", "a.b.example:5000/app", False),  # a glob is one label
        ("registry.example:5000/team", IMAGE, True),
        ("registry.example:5000/other", IMAGE, False),
        ("docker.io", "busybox", True),  # asked as docker.io/library/busybox
        ("*.dkr.ecr.*.amazonaws.com", "1234.dkr.ecr.eu-west-1.amazonaws.com/app:v1", True),
    ],
)
def test_match_images_as_the_kubelet_matches_them(pattern: str, image: str, served: bool) -> None:
    plugin = FakePlugin(Response("Image", None, (Entry(pattern, "u", "p"),)))
    providers = CredentialProviders([node_provider(plugin, FakeClock(), pattern)])
    assert bool(providers.lookup(image)) is served
    assert len(plugin.asked) == served


def test_the_plugin_is_asked_for_the_repository_and_its_credentials_fit_the_image() -> None:
    auth = (Entry("registry.example:5000/team", "robot", "t0ken"), Entry("other.example", "x", "y"))
    plugin = FakePlugin(Response("Image", None, auth))
    providers = CredentialProviders([node_provider(plugin, FakeClock())])

    assert providers.lookup(IMAGE) == [
        Credential("robot", "t0ken", "", "registry.example:5000/team", "creds")
    ]
    assert plugin.asked == ["registry.example:5000/team/app"]  # no tag, as the kubelet asks


@pytest.mark.parametrize(
    ("key_type", "other", "runs"),
    [
        ("Image", f"{REGISTRY}/team/app:v2", 1),  # the same repository
        ("Image", f"{REGISTRY}/team/db:v1", 2),
        ("Registry", f"{REGISTRY}/team/db:v1", 1),
        ("Registry", "other.example/db", 2),
        ("Global", "other.example/db", 1),
    ],
)
def test_an_answer_is_cached_by_its_cache_key_type(key_type: str, other: str, runs: int) -> None:
    plugin = FakePlugin(Response(key_type, None, AUTH))
    provider = node_provider(plugin, FakeClock(), REGISTRY, "other.example")
    provider.provide("registry.example:5000/team/app")
    provider.provide(normalised_repository(other))
    assert len(plugin.asked) == runs


def test_an_answer_is_kept_for_its_cache_duration_or_the_default() -> None:
    clock = FakeClock()
    plugin = FakePlugin(Response("Registry", 60.0, AUTH))
    provider = node_provider(plugin, clock)
    repository = "registry.example:5000/team/app"

    provider.provide(repository)
    clock.step(60)
    assert provider.provide(repository) == AUTH  # kept up to its end
    assert len(plugin.asked) == 1
    clock.step(0.001)
    provider.provide(repository)
    assert len(plugin.asked) == 2

    plugin.response = Response("Registry", None, AUTH)  # the provider's default, 300 s
    clock.step(61)
    provider.provide(repository)
    clock.step(299)
    provider.provide(repository)
    assert len(plugin.asked) == 3


@pytest.mark.parametrize(("duration", "default"), [(0.0, 300.0), (None, 0.0), (-5.0, 300.0)])
def test_a_zero_duration_is_not_cached(duration: float | None, default: float) -> None:
    plugin = FakePlugin(Response("Global", duration, AUTH))
    provider = node_provider(plugin, FakeClock(), default_s=default)
    provider.provide("registry.example:5000/app")
    provider.provide("registry.example:5000/app")
    assert len(plugin.asked) == 2


def test_expired_answers_are_purged_every_15_minutes() -> None:
    clock = FakeClock()
    cache = AnswerCache(clock)
    cache.put("a.example", AUTH, 10)
    cache.put("b.example", AUTH, 2 * PURGE_INTERVAL_S)
    clock.step(PURGE_INTERVAL_S + 1)
    assert cache.get("c.example/app") is None
    assert len(cache) == 1


def test_a_failing_plugin_is_logged_and_gives_nothing(caplog: pytest.LogCaptureFixture) -> None:
    plugin = FakePlugin()
    plugin.error = PluginFailed("error execing credential provider plugin creds: exit status 1")
    providers = CredentialProviders([node_provider(plugin, FakeClock())])
    with caplog.at_level(logging.ERROR):
        assert providers.lookup(IMAGE) == []
    assert "credential provider failed provider=creds" in caplog.text
    assert "exit status 1" in caplog.text


def test_an_unknown_cache_key_type_gives_nothing(caplog: pytest.LogCaptureFixture) -> None:
    plugin = FakePlugin(Response("Pod", None, AUTH))
    providers = CredentialProviders([node_provider(plugin, FakeClock())])
    assert providers.lookup(IMAGE) == []
    assert 'did not return a valid cacheKeyType: "Pod"' in caplog.text


def test_pulls_asking_at_once_share_one_run() -> None:
    plugin = FakePlugin(Response("Image", 0.0, AUTH))  # not cached: only the sharing helps
    plugin.release.clear()
    providers = CredentialProviders([node_provider(plugin, FakeClock())])
    found: list[list[Credential]] = []
    pulls = [threading.Thread(target=lambda: found.append(providers.lookup(IMAGE))) for _ in "ab"]
    for pull in pulls:
        pull.start()
    while not plugin.asked:
        threading.Event().wait(0.01)
    plugin.release.set()
    for pull in pulls:
        pull.join(10)
    assert len(found) == 2 and all(len(credentials) == 1 for credentials in found)
    assert len(plugin.asked) <= 2  # a pull that came after the run ended runs its own


def test_earlier_providers_credentials_first_on_the_same_key() -> None:
    first = FakePlugin(Response("Image", None, (Entry(REGISTRY, "first", "p"),)))
    second = FakePlugin(Response("Image", None, (Entry(REGISTRY, "second", "p"),)))
    clock = FakeClock()
    providers = CredentialProviders([node_provider(first, clock), node_provider(second, clock)])
    assert [c.username for c in providers.lookup(IMAGE)] == ["first", "second"]


def test_a_pull_tries_the_pods_secrets_first_then_the_providers() -> None:
    node = Node()
    plugin = FakePlugin(Response("Registry", None, AUTH))
    providers = CredentialProviders([node_provider(plugin, FakeClock())])
    node.puller = ImagePuller(
        node.runtime, node.events, node.objects, PodMetrics().startup, node_credentials=providers
    )
    node.secret("regcred", {REGISTRY: {"username": "alice", "password": "stale"}})
    node.runtime.fail("PullImage", "UNKNOWN", REFUSED)  # the secret's is refused

    node.ensure(pod("regcred"))

    assert node.runtime.pulls == [
        (IMAGE, RegistryAuth("alice", "stale")),
        (IMAGE, RegistryAuth("robot", "t0ken")),
    ]


def test_without_pull_secrets_the_providers_credentials_alone() -> None:
    node = Node()
    providers = CredentialProviders(
        [node_provider(FakePlugin(Response("Global", None, AUTH)), FakeClock())]
    )
    node.puller = ImagePuller(
        node.runtime, node.events, node.objects, PodMetrics().startup, node_credentials=providers
    )
    node.ensure(pod())
    assert node.runtime.pulls == [(IMAGE, RegistryAuth("robot", "t0ken"))]
