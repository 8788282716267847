"""The bus wire format: every message survives a round trip; bad frames are named precisely."""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

import msgpack
import pytest
from pkletd.ipc.bus import codec, messages
from pkletd.ipc.bus.codec import BadMessage
from pkletd.ipc.bus.messages import SCHEMA_VERSION, Hello


def sample(hint: Any) -> Any:
    """A non-trivial value of the type ``hint``; fails on a type the test cannot build."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return {"nested": [1, "two", 3.5, True, None]}
    if isinstance(hint, typing.NewType):
        return hint(sample(hint.__supertype__))
    if isinstance(hint, type) and issubclass(hint, enum.StrEnum):
        return list(hint)[-1]
    if hint is bool:
        return True
    if hint is int:
        return 42
    if hint is float:
        return 1.25
    if hint is str:
        return "sample"
    if hint is bytes:
        return b"\x00\xffsample"  # not UTF-8: a secret's bytes travel as they are
    if typing.is_typeddict(hint):
        return {key: sample(item) for key, item in typing.get_type_hints(hint).items()}
    if origin is typing.Literal:
        return typing.get_args(hint)[-1]
    if origin is list:
        (item,) = typing.get_args(hint)
        return [sample(item), sample(item)]
    if origin is dict:
        key, item = typing.get_args(hint)
        return {sample(key): sample(item)}
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in typing.get_args(hint) if a is not type(None)))
    pytest.fail(f"no sample for message field type {hint!r}: teach sample() or fix the message")


def sample_message(cls: type[messages.Message]) -> messages.Message:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: sample(hints[f.name]) for f in dataclasses.fields(cls)})


def frame(*envelope: Any) -> bytes:
    return msgpack.packb(list(envelope), use_bin_type=True)


def hello_frame(body: Any, version: int = SCHEMA_VERSION, kind: str = "Hello") -> bytes:
    return frame(version, kind, "pleg", 7, 12.5, body)


def rejection(data: bytes) -> str:
    with pytest.raises(BadMessage) as caught:
        codec.decode(data)
    return str(caught.value)


@pytest.mark.parametrize("cls", list(messages.MESSAGES.values()), ids=list(messages.MESSAGES))
def test_every_message_round_trips(cls: type[messages.Message]) -> None:
    message = sample_message(cls)
    envelope = codec.decode(codec.encode(message, "pleg", 7, 12.5))
    assert envelope == codec.Envelope("pleg", 7, 12.5, message)


def test_defaulted_field_may_be_left_out() -> None:
    pod = {"metadata": {"name": "p"}}
    decoded = codec.decode(
        frame(SCHEMA_VERSION, "PodStatusUpdated", "parent", 1, 0.0, {"pod": pod})
    )
    assert decoded.message == messages.PodStatusUpdated(pod)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (hello_frame({"worker": "pleg", "pid": 1}, version=SCHEMA_VERSION + 1), "schema version"),
        (hello_frame({"worker": "pleg", "pid": 1}, kind="Goodbye"), "unknown kind 'Goodbye'"),
        (hello_frame({"worker": "pleg", "pid": 1, "extra": 0}), "Hello has no field 'extra'"),
        (hello_frame({"worker": "pleg"}), "Hello field 'pid' is missing"),
        (hello_frame({"worker": "pleg", "pid": "1"}), "Hello field 'pid': str is not int"),
        (hello_frame({"worker": "pleg", "pid": True}), "Hello field 'pid': bool is not int"),
        (hello_frame({"worker": 3, "pid": 1}), "Hello field 'worker': int is not str"),
        (hello_frame(["pleg", 1]), "Hello body is not a map"),
        (b"\xc1not msgpack", "undecodable frame"),
        (frame(SCHEMA_VERSION, "Hello", "pleg"), "not a 6-element envelope"),
        (msgpack.packb({"kind": "Hello"}), "not a 6-element envelope"),
        (frame(SCHEMA_VERSION, "Hello", 5, 1, 0.0, {}), "envelope field sender"),
        (frame(SCHEMA_VERSION, "Hello", "pleg", "1", 0.0, {}), "bad seq or time"),
    ],
    ids=[
        "schema-version",
        "unknown-kind",
        "unknown-field",
        "missing-field",
        "str-for-int",
        "bool-for-int",
        "int-for-str",
        "body-not-map",
        "not-msgpack",
        "short-envelope",
        "map-envelope",
        "sender-not-str",
        "seq-not-int",
    ],
)
def test_bad_frames_are_rejected_by_name(data: bytes, expected: str) -> None:
    assert expected in rejection(data)


def test_rejection_names_the_sender() -> None:
    assert rejection(hello_frame({"worker": "pleg"})).startswith("from pleg:")


def test_a_sender_that_would_break_a_log_line_is_shown_quoted() -> None:
    """A rogue peer's sender went into the log line as it came: newlines and NULs could
    forge lines. Found by the soak's bus fuzzer."""
    forged = "pleg\n2026-01-01 00:00:00,000 ERROR pkletd: supervisor[1] forged\x00"
    message = rejection(frame(SCHEMA_VERSION, "Hello", forged, 1, 0.0, {"worker": "pleg"}))
    assert message.startswith(f"from {forged!r}: Hello field 'pid' is missing")
    assert message.isprintable()


def test_nested_types_are_checked() -> None:
    body = {"seq": 1, "pods": [], "containers": {"c1": 3}}
    message = rejection(frame(SCHEMA_VERSION, "Snapshot", "parent", 1, 0.0, body))
    assert "Snapshot field 'containers'" in message


def test_encoded_hello_is_a_plain_msgpack_array() -> None:
    raw = msgpack.unpackb(codec.encode(Hello("pleg", 12), "pleg", 3, 1.5))
    assert raw == [SCHEMA_VERSION, "Hello", "pleg", 3, 1.5, {"worker": "pleg", "pid": 12}]


def test_enum_fields_decode_to_members_and_refuse_other_values() -> None:
    body = {"pod_uid": "u1", "event": "ContainerDied", "object_id": "c1", "state": "exited"}
    decoded = codec.decode(frame(SCHEMA_VERSION, "PodLifecycleEvent", "pleg", 1, 0.0, body))
    assert isinstance(decoded.message, messages.PodLifecycleEvent)
    assert decoded.message.event is messages.LifecycleEventType.CONTAINER_DIED
    body["event"] = "ContainerExploded"
    error = rejection(frame(SCHEMA_VERSION, "PodLifecycleEvent", "pleg", 1, 0.0, body))
    assert "PodLifecycleEvent field 'event'" in error


def metrics_report_frame(**changes: Any) -> bytes:
    family = {
        "name": "kubelet_running_pods",
        "type": "gauge",
        "help": "Number of pods that have a running pod sandbox",
        "labels": [],
        "bounds": [],
        "series": [{"labels": [], "value": 2.0, "buckets": []}],
        **changes,
    }
    return frame(SCHEMA_VERSION, "MetricsReport", "supervisor", 1, 0.0, {"families": [family]})


def test_typed_maps_are_checked_key_by_key() -> None:
    decoded = codec.decode(metrics_report_frame())
    assert isinstance(decoded.message, messages.MetricsReport)
    assert decoded.message.families[0]["series"][0]["value"] == 2.0
    for changes in ({"type": "summary"}, {"help": 3}, {"extra": 1}, {"series": [{"value": 1}]}):
        assert "MetricsReport field 'families'" in rejection(metrics_report_frame(**changes))
    family = msgpack.unpackb(metrics_report_frame())[5]["families"][0]
    del family["bounds"]
    body = {"families": [family]}
    error = rejection(frame(SCHEMA_VERSION, "MetricsReport", "supervisor", 1, 0.0, body))
    assert "MetricsReport field 'families'" in error
