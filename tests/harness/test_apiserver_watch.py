"""Watches on the test API server, as the official client's ``watch.Watch`` and a resuming
informer-like loop see them: initial events, bookmarks, selector enter/leave, 410 after
compaction, and resuming after dropped watches and a server restart with no event lost or
repeated."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import watch
from kubernetes.client.rest import ApiException

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube, eventually, expect_failure


class Recorder:
    """Runs a watch in a thread, resuming from the last resourceVersion it saw (like an
    informer), and records ``(type, name, resourceVersion)``."""

    def __init__(self, kube: Kube, resource_version: str, **selectors: Any) -> None:
        self.kube = Kube(kube.server, retries=False)
        self.resource_version = resource_version
        self.selectors = selectors
        self.events: list[tuple[str, str, str]] = []
        self.bookmarks: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        self._done = threading.Event()
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            try:
                self._stream()
            except (urllib3.exceptions.HTTPError, OSError):
                self._done.wait(0.05)  # the server is away: try again
            except ApiException as exc:
                self.errors.append(exc)
                return

    def _stream(self) -> None:
        for event in self._watch.stream(
            self.kube.core.list_namespaced_config_map,
            "default",
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            **self.selectors,
        ):
            raw = event["raw_object"]
            self.resource_version = raw["metadata"]["resourceVersion"]
            if event["type"] == "BOOKMARK":
                self.bookmarks.append(raw)
            else:
                self.events.append((event["type"], raw["metadata"]["name"], self.resource_version))
            if self._done.is_set():
                return

    def names(self, kind: str = "ADDED") -> list[str]:
        return [name for t, name, _ in self.events if t == kind]

    def stop(self, server: ApiServer) -> None:
        self._done.set()
        self._watch.stop()
        server.drop_watches()
        self._thread.join(10)
        assert not self._thread.is_alive()
        self.errors.clear()
        self.kube.close()
        gc.collect()  # failed connections sit in exception reference cycles


@pytest.fixture
def recorders(apiserver: ApiServer) -> Iterator[list[Recorder]]:
    started: list[Recorder] = []
    yield started
    for recorder in started:
        recorder.stop(apiserver)


def current_rv(kube: Kube) -> str:
    return str(kube.core.list_namespaced_config_map("default").metadata.resource_version)


def test_watch_starts_with_the_current_state_and_sends_bookmarks(
    kube: Kube, recorders: list[Recorder]
) -> None:
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "before"}})
    recorder = Recorder(kube, "")
    recorders.append(recorder)
    eventually(lambda: "before" in recorder.names(), what="the initial ADDED")
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
    kube.core.patch_namespaced_config_map("after", "default", {"data": {"k": "v"}})
    kube.core.delete_namespaced_config_map("after", "default")
    eventually(lambda: recorder.names("DELETED") == ["after"], what="the DELETED event")
    kinds = [t for t, name, _ in recorder.events if name == "after"]
    assert kinds == ["ADDED", "MODIFIED", "DELETED"]
    bookmark = eventually(
        lambda: recorder.bookmarks[-1] if recorder.bookmarks else None, what="a bookmark"
    )
    assert set(bookmark) == {"kind", "apiVersion", "metadata"}
    assert (bookmark["kind"], bookmark["apiVersion"]) == ("ConfigMap", "v1")
    assert set(bookmark["metadata"]) == {"resourceVersion"}
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(recorder.events[-1][2])


def test_objects_entering_and_leaving_a_selector(kube: Kube, recorders: list[Recorder]) -> None:
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    recorder = Recorder(kube, current_rv(kube), label_selector="team=a")
    recorders.append(recorder)
    kube.core.patch_namespaced_config_map("c", "default", {"metadata": {"labels": {"team": "a"}}})
    eventually(lambda: recorder.names() == ["c"], what="ADDED on entering the selector")
    left = kube.core.patch_namespaced_config_map(
        "c", "default", {"metadata": {"labels": {"team": "b"}}}
    )
    eventually(lambda: recorder.names("DELETED") == ["c"], what="DELETED on leaving it")
    assert recorder.events[-1][2] == left.metadata.resource_version
    kube.core.patch_namespaced_config_map("c", "default", {"data": {"ignored": "yes"}})
    kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "marker", "labels": {"team": "a"}}}
    )
    eventually(lambda: "marker" in recorder.names(), what="the marker")
    assert [name for _, name, _ in recorder.events] == ["c", "c", "marker"]


def test_field_selector_on_a_single_name(kube: Kube) -> None:
    rv = current_rv(kube)
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "other"}})
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "mine"}})
    stream = watch.Watch().stream(
        kube.core.list_namespaced_config_map,
        "default",
        resource_version=rv,
        timeout_seconds=1,
        field_selector="metadata.name=mine",
    )
    assert [e["raw_object"]["metadata"]["name"] for e in stream] == ["mine"]


def test_too_old_resource_version_is_410_after_compaction(apiserver: ApiServer, kube: Kube) -> None:
    old = current_rv(kube)
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    apiserver.compact()
    with pytest.raises(ApiException) as caught:
        list(
            watch.Watch().stream(
                kube.core.list_namespaced_config_map,
                "default",
                resource_version=old,
                timeout_seconds=5,
            )
        )
    assert caught.value.status == 410
    assert caught.value.reason == (
        f"Expired: too old resource version: {old} ({apiserver.store.oldest_revision})"
    )
    del caught
    code, body, _ = kube.raw(
        "GET", f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={old}"
    )
    assert code == 200 and body["type"] == "ERROR"
    assert body["object"]["code"] == 410 and body["object"]["reason"] == "Expired"
    body = expect_failure(
        kube.core.list_namespaced_config_map,
        "default",
        resource_version=old,
        resource_version_match="Exact",
    )
    assert body["message"] == "The resourceVersion for the provided list is too old."
    current = kube.core.list_namespaced_config_map(
        "default", resource_version=old, resource_version_match="NotOlderThan"
    )
    assert "c" in [c.metadata.name for c in current.items]


def test_exact_list_shows_the_past(kube: Kube) -> None:
    kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"v": "1"}}
    )
    then = current_rv(kube)
    kube.core.patch_namespaced_config_map("c", "default", {"data": {"v": "2"}})
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "d"}})
    past = kube.core.list_namespaced_config_map(
        "default", resource_version=then, resource_version_match="Exact"
    )
    assert past.metadata.resource_version == then
    assert {c.metadata.name: c.data for c in past.items if c.data is None or "v" in c.data} == {
        "c": {"v": "1"}
    }


def test_resume_after_dropped_watches_loses_and_repeats_nothing(
    apiserver: ApiServer, kube: Kube, recorders: list[Recorder]
) -> None:
    recorder = Recorder(kube, current_rv(kube))
    recorders.append(recorder)
    for round_ in range(3):
        for i in range(3):
            kube.core.create_namespaced_config_map(
                "default", {"metadata": {"name": f"r{round_}-{i}"}}
            )
        apiserver.drop_watches()
    expected = [f"r{r}-{i}" for r in range(3) for i in range(3)]
    eventually(lambda: len(recorder.names()) >= 9, what="all nine ADDED events")
    assert recorder.names() == expected
    assert apiserver.request_count(resource="configmaps", verb="WATCH") >= 1  # ended watches


def test_resume_after_restart_loses_and_repeats_nothing(
    apiserver: ApiServer, kube: Kube, recorders: list[Recorder]
) -> None:
    recorder = Recorder(kube, current_rv(kube))
    recorders.append(recorder)
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    eventually(lambda: recorder.names() == ["a"], what="the first event")
    port = apiserver.port
    apiserver.stop()
    apiserver.store.create("configmaps", {"metadata": {"name": "b", "namespace": "default"}})
    apiserver.start()
    assert apiserver.port == port
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    eventually(lambda: recorder.names() == ["a", "b", "c"], what="events across the restart")
    assert not recorder.errors


def test_send_initial_events_ends_with_a_marked_bookmark(kube: Kube) -> None:
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    path = (
        "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true"
        "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    )
    code, body, _ = kube.raw("GET", path)
    assert code == 200
    events = body.splitlines() if isinstance(body, str) else [json.dumps(body)]
    parsed = [json.loads(e) for e in events if e]
    assert [e["type"] for e in parsed[:2]] == ["ADDED", "ADDED"]
    marker = next(e for e in parsed if e["type"] == "BOOKMARK")
    assert marker["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    code, body, _ = kube.raw(
        "GET", "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true"
    )
    assert code == 422 and body["details"]["kind"] == "ListOptions"
