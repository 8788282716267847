"""containerd's event stream as the PLEG reads it: decoding envelopes, the filters it
subscribes with, and the committed modules generated from ``proto/containerd``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import any_pb2, descriptor_pb2, timestamp_pb2
from pkletd.ipc.runtime import events as runtimeevents
from pkletd.ipc.runtime.containerd import container_pb2, events_pb2, task_pb2
from pkletd.ipc.runtime.events import BadEvent, RuntimeEvent, TaskExited, Topic, decode

REPO = Path(__file__).resolve().parents[3]
EXITED_AT = timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=123_456_789)
EXITED_NS = 1_700_000_000_123_456_789
CID = "c" * 64
EXEC_ID = "e" * 64


def envelope(topic: str, event: Any, namespace: str = "k8s.io", type_url: str = "") -> bytes:
    name = type_url or event.DESCRIPTOR.full_name
    payload = any_pb2.Any(type_url=name, value=event.SerializeToString())
    return events_pb2.Envelope(namespace=namespace, topic=topic, event=payload).SerializeToString()


def test_a_containers_own_exit_names_the_container() -> None:
    raw = envelope("/tasks/exit", task_pb2.TaskExit(container_id=CID, id=CID))
    assert decode(raw) == RuntimeEvent(Topic.TASK_EXIT, CID, TaskExited(0, 0))


def test_an_exit_without_a_process_id_is_the_containers_own() -> None:
    raw = envelope("/tasks/exit", task_pb2.TaskExit(container_id=CID))
    assert decode(raw) == RuntimeEvent(Topic.TASK_EXIT, CID, TaskExited(0, 0))


def test_an_execs_exit_is_skipped() -> None:
    """Every exec probe ends with one; the container itself runs on."""
    raw = envelope("/tasks/exit", task_pb2.TaskExit(container_id=CID, id=EXEC_ID))
    assert decode(raw) is None


def test_a_containers_task_deleted_after_its_exit_names_the_container() -> None:
    raw = envelope("/tasks/delete", task_pb2.TaskDelete(container_id=CID))
    assert decode(raw) == RuntimeEvent(Topic.TASK_DELETE, CID, TaskExited(0, 0))


@pytest.mark.parametrize("message", [task_pb2.TaskExit, task_pb2.TaskDelete])
def test_an_exit_carries_its_status_and_time_as_the_cri_records_them(message: Any) -> None:
    topic = "/tasks/exit" if message is task_pb2.TaskExit else "/tasks/delete"
    raw = envelope(topic, message(container_id=CID, exit_status=137, exited_at=EXITED_AT))
    assert decode(raw) == RuntimeEvent(Topic(topic), CID, TaskExited(137, EXITED_NS))


def test_an_oom_kill_names_the_container() -> None:
    raw = envelope("/tasks/oom", task_pb2.TaskOOM(container_id=CID))
    assert decode(raw) == RuntimeEvent(Topic.TASK_OOM, CID)


def test_an_execs_delete_is_skipped() -> None:
    raw = envelope("/tasks/delete", task_pb2.TaskDelete(container_id=CID, id=EXEC_ID))
    assert decode(raw) is None


def test_a_deleted_container_is_named() -> None:
    raw = envelope("/containers/delete", container_pb2.ContainerDelete(id=CID))
    assert decode(raw) == RuntimeEvent(Topic.CONTAINER_DELETE, CID)


def test_a_type_url_with_a_prefix_is_read_by_its_last_part() -> None:
    url = "type.googleapis.com/containerd.events.TaskExit"
    raw = envelope("/tasks/exit", task_pb2.TaskExit(container_id=CID), type_url=url)
    assert decode(raw) == RuntimeEvent(Topic.TASK_EXIT, CID, TaskExited(0, 0))


@pytest.mark.parametrize(
    ("topic", "namespace"), [("/tasks/exit", "moby"), ("/tasks/start", "k8s.io")]
)
def test_other_namespaces_and_topics_are_not_acted_on(topic: str, namespace: str) -> None:
    raw = envelope(topic, task_pb2.TaskExit(container_id=CID), namespace=namespace)
    assert decode(raw) is None


def test_a_topic_carrying_another_message_is_a_bad_event() -> None:
    raw = envelope("/tasks/exit", container_pb2.ContainerDelete(id=CID))
    with pytest.raises(BadEvent, match="/tasks/exit carries containerd.events.ContainerDelete"):
        decode(raw)


def test_garbage_is_a_bad_event() -> None:
    with pytest.raises(BadEvent, match="undecodable envelope of 3 bytes"):
        decode(b"\xff\xff\xff")


def test_the_subscription_asks_for_each_topic_in_the_cri_namespace() -> None:
    assert runtimeevents.filters() == [
        'namespace=="k8s.io",topic=="/tasks/exit"',
        'namespace=="k8s.io",topic=="/tasks/delete"',
        'namespace=="k8s.io",topic=="/tasks/oom"',
        'namespace=="k8s.io",topic=="/containers/delete"',
    ]


@pytest.mark.parametrize(
    ("proto", "module"),
    [
        ("containerd/services/events/v1/events.proto", events_pb2),
        ("containerd/events/task.proto", task_pb2),
        ("containerd/events/container.proto", container_pb2),
    ],
)
def test_generated_modules_match_their_protos(tmp_path: Path, proto: str, module: Any) -> None:
    """`make proto` output is committed: it must describe what the .proto says."""
    out = tmp_path / "set.pb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{REPO / 'proto'}",
            f"--descriptor_set_out={out}",
            str(REPO / "proto" / proto),
        ],
        check=True,
        capture_output=True,
    )
    wanted = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in wanted.message_type:  # protoc fills json_name in; generated code leaves it
        for field in message.field:
            field.ClearField("json_name")
    committed = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    assert committed == wanted
