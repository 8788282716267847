"""The pod-objects worker's rules on their own, no API server: when a token is refreshed
(as the kubelet's token manager), how an object's reading is decoded (or refused), the
node's object TTL, Service summaries, and the outbox between the worker and its bus."""

from __future__ import annotations

import base64

from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind
from pkletd.ipc.bus.sender import FakeSender
from pkletd.workers.podobjects.nodettl import TTL_ANNOTATION, object_ttl
from pkletd.workers.podobjects.outbox import Outbox
from pkletd.workers.podobjects.reading import MAX_DATA_BYTES, failure, reading
from pkletd.workers.podobjects.services import summary
from pkletd.workers.podobjects.tokens import Issued, refresh_at, requires_refresh


def test_refresh_decision_follows_the_token_manager() -> None:
    hour = Issued("t", expires_at=10_000.0 + 3600, lifetime=3600)
    assert refresh_at(hour) == 10_000.0 + 0.8 * 3600
    assert not requires_refresh(hour, 10_000.0 + 0.8 * 3600 - 1)
    assert requires_refresh(hour, 10_000.0 + 0.8 * 3600)
    assert not requires_refresh(hour, 10_000.0 - 1)  # the API server's clock is ahead: kept
    year = Issued("t", expires_at=10_000.0 + 365 * 86400, lifetime=365 * 86400)
    assert refresh_at(year) == 10_000.0 + 86400  # a day old at most
    assert not requires_refresh(year, 10_000.0 + 86399)
    assert requires_refresh(year, 10_000.0 + 86400)


def test_a_reading_decodes_and_refuses_what_is_too_large() -> None:
    key = ObjectKey(ObjectKind.SECRET, "default", "big")
    small = {"metadata": {"resourceVersion": "7"}, "type": "kubernetes.io/tls"}
    small["data"] = {"tls.key": base64.b64encode(b"k").decode()}
    read = reading(key, small)
    assert (read.data, read.secret_type, read.resource_version) == (
        {"tls.key": b"k"},
        "kubernetes.io/tls",
        "7",
    )
    large = {"data": {"blob": base64.b64encode(b"x" * MAX_DATA_BYTES).decode()}}
    refused = reading(key, large)
    assert refused.error == (
        f'secret "big" is too large: {MAX_DATA_BYTES + 4} bytes of data, '
        f"pkletd takes at most {MAX_DATA_BYTES}"
    )
    assert not refused.missing and not refused.data
    bad = reading(key, {"data": {"k": "not base64!"}})
    assert bad.error == 'secret "big" has data that is not valid base64'
    assert reading(key, None).error == 'secret "big" not found'


def test_object_ttl_and_service_summaries() -> None:
    assert object_ttl({"metadata": {"annotations": {TTL_ANNOTATION: "15"}}}) == 15.0
    assert object_ttl({"metadata": {"annotations": {TTL_ANNOTATION: "soon"}}}) is None
    assert object_ttl({"metadata": {}}) is None
    assert summary({"metadata": {"name": "db"}, "spec": {"clusterIP": "None"}}) is None
    assert summary({"metadata": {"name": "db"}, "spec": {"clusterIP": ""}}) is None
    found = summary(
        {
            "metadata": {"name": "db"},
            "spec": {"clusterIP": "10.0.0.5", "ports": [{"port": 5432}], "type": "ClusterIP"},
        }
    )
    assert found == {
        "name": "db",
        "clusterIP": "10.0.0.5",
        "ports": [{"name": "", "port": 5432, "protocol": "TCP"}],
    }


def test_the_outbox_keeps_a_reading_over_a_failure_and_holds_what_the_bus_refuses() -> None:
    bus = FakeSender()
    outbox = Outbox(bus)
    key = ObjectKey(ObjectKind.CONFIG_MAP, "default", "conf")
    fresh = failure(key, "HTTP 500")
    outbox.put_object(key, fresh)  # never read: the failure is the news
    read = reading(key, {"metadata": {"resourceVersion": "3"}, "data": {"a": "1"}})
    outbox.put_object(key, read)
    outbox.put_object(key, failure(key, "HTTP 503"))  # read before: kept
    outbox.put_object(key, read)  # the same again: nothing to send
    assert bus.sent == [fresh, read]
    bus.refusing = True
    gone = reading(key, None)
    outbox.put_object(key, gone)  # missing replaces a reading, once the bus takes it
    assert outbox.owed() and bus.sent == [fresh, read]
    bus.refusing = False
    outbox.flush()
    assert not outbox.owed() and bus.sent == [fresh, read, gone]
    outbox.resend()
    assert bus.sent == [fresh, read, gone, gone]
