"""containerd's own event stream, as the PLEG follows it.

containerd 1.6 has no CRI ``GetContainerEvents`` (1.7 and later), but publishes every
change of its objects on ``containerd.services.events.v1.Events/Subscribe``, on the same
socket as the CRI: each event in an ``Envelope`` (namespace, topic, the event message as a
``google.protobuf.Any`` whose type URL names it, ``containerd.events.TaskExit``). The
PLEG subscribes, in the CRI's namespace ``k8s.io``, to what can happen to a pod's
container or sandbox without pkletd:

- ``/tasks/exit``: a task's process exited (it ended, was killed, or the OOM killer
  took it), with its exit status and time, which the CRI plugin records as the
  container's exit code and ``finished_at`` (``TaskExited``). A sandbox's task is its
  pause container, whose id is the sandbox's. An exec's exit (every exec probe's) names
  the exec and is skipped.
- ``/tasks/delete``: the exited task was deleted (with the same exit status and time).
  The CRI plugin deletes a container's task when it handles the exit and marks the
  container exited right after, so this is when the CRI is about to show the exit (an
  exec's delete is skipped too).
- ``/tasks/oom``: the OOM killer killed a process of the task; the CRI plugin then gives
  the container the reason ``OOMKilled``, whenever it exits.
- ``/containers/delete``: a container's record was deleted (a removal).

What pkletd starts or creates it knows from its own calls, so no other topic is asked
for.

The only module that imports the modules generated from ``proto/containerd``. A
subscription is read on its caller's thread (a blocking iterator); ``cancel`` from
another thread ends it. Each process makes its own ``RuntimeEvents`` after the fork.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from pkletd.ipc.runtime.containerd import container_pb2, events_pb2, task_pb2

log = logging.getLogger(__name__)

NAMESPACE = "k8s.io"  # the CRI plugin's containerd namespace
SUBSCRIBE = "/containerd.services.events.v1.Events/Subscribe"


class Topic(enum.StrEnum):
    TASK_EXIT = "/tasks/exit"
    TASK_DELETE = "/tasks/delete"
    TASK_OOM = "/tasks/oom"
    CONTAINER_DELETE = "/containers/delete"


_TOPICS = frozenset(topic.value for topic in Topic)


# The message each topic carries (its type URL ends with the message's full name).
_PAYLOADS: dict[Topic, Any] = {
    Topic.TASK_EXIT: task_pb2.TaskExit,
    Topic.TASK_DELETE: task_pb2.TaskDelete,
    Topic.TASK_OOM: task_pb2.TaskOOM,
    Topic.CONTAINER_DELETE: container_pb2.ContainerDelete,
}


@dataclass(frozen=True, slots=True)
class TaskExited:
    """A task's exit as its event tells it: what the CRI shows as the container's exit
    code and ``finished_at`` (nanoseconds since the epoch) once it has recorded it."""

    exit_code: int
    finished_at: int


@dataclass(frozen=True, slots=True)
class RuntimeEvent:
    """Something happened to a runtime object: ``object_id`` is a container's id or a
    sandbox's (a sandbox's task is its pause container, which has the sandbox's id);
    ``exited``: a task's exit or delete, its exit status and time."""

    topic: Topic
    object_id: str
    exited: TaskExited | None = None


class BadEvent(ValueError):
    """An event the runtime sent that cannot be read."""


class StreamError(RuntimeError):
    """The subscription ended: ``code`` is the gRPC status code's name ("OK" when the
    runtime closed the stream itself)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def filters() -> list[str]:
    """One containerd filter per topic, each in the CRI's namespace (filters are ORed;
    the conditions of one, comma-separated, are ANDed)."""
    return [f'namespace=="{NAMESPACE}",topic=="{topic.value}"' for topic in Topic]


def decode(raw: bytes) -> RuntimeEvent | None:
    """The event in one serialized ``Envelope``; None for one the PLEG does not act on
    (another namespace or topic, an exec's exit)."""
    try:
        envelope = events_pb2.Envelope.FromString(raw)
    except DecodeError as exc:
        raise BadEvent(f"undecodable envelope of {len(raw)} bytes: {exc}") from exc
    if envelope.namespace != NAMESPACE or envelope.topic not in _TOPICS:
        return None
    topic = Topic(envelope.topic)
    payload_type = _PAYLOADS[topic]
    name = envelope.event.type_url.rsplit("/", 1)[-1]
    if name != payload_type.DESCRIPTOR.full_name:
        raise BadEvent(f"topic {topic.value} carries {name or 'no event'}")
    try:
        payload = payload_type.FromString(envelope.event.value)
    except DecodeError as exc:
        raise BadEvent(f"undecodable {name}: {exc}") from exc
    if topic is Topic.CONTAINER_DELETE:
        return RuntimeEvent(topic, payload.id)
    if topic is Topic.TASK_OOM:
        return RuntimeEvent(topic, payload.container_id)
    if payload.id not in ("", payload.container_id):
        return None  # an exec's process
    exited = TaskExited(payload.exit_status, _nanoseconds(payload.exited_at))
    return RuntimeEvent(topic, payload.container_id, exited)


def _nanoseconds(stamp: Any) -> int:
    """A ``google.protobuf.Timestamp`` in nanoseconds since the epoch, as the CRI counts."""
    return int(stamp.seconds) * 1_000_000_000 + int(stamp.nanos)


class Subscription:
    """One open subscription: iterate it for its events; it raises ``StreamError`` when
    the stream ends, however it ends (``cancel`` included: ``CANCELLED``)."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> Iterator[RuntimeEvent]:
        try:
            for raw in self._call:
                event = _readable(raw)
                if event is not None:
                    yield event
        except grpc.RpcError as exc:
            raise StreamError(exc.code().name, exc.details() or "") from exc
        raise StreamError("OK", "the runtime ended the stream")

    def active(self) -> bool:
        """Not ended yet (a runtime without the events API ends it at once: UNIMPLEMENTED)."""
        return bool(self._call.is_active())

    def cancel(self) -> None:
        self._call.cancel()


def _readable(raw: bytes) -> RuntimeEvent | None:
    try:
        return decode(raw)
    except BadEvent as exc:
        log.warning("runtime event skipped reason=%s", exc)
        return None


class RuntimeEvents:
    """Subscriptions to the runtime's events, over a channel of their own."""

    def __init__(self, endpoint: str) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        self._subscribe = self._channel.unary_stream(
            SUBSCRIBE,
            request_serializer=events_pb2.SubscribeRequest.SerializeToString,
            response_deserializer=None,  # bytes: ``decode`` reads them
        )

    def subscribe(self) -> Subscription:
        request = events_pb2.SubscribeRequest(filters=filters())
        return Subscription(self._subscribe(request))

    def close(self) -> None:
        self._channel.close()
