import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskExit(_message.Message):
    __slots__ = ("container_id", "id", "exit_status", "exited_at")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    EXITED_AT_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    id: str
    exit_status: int
    exited_at: _timestamp_pb2.Timestamp
    def __init__(self, container_id: _Optional[str] = ..., id: _Optional[str] = ..., exit_status: _Optional[int] = ..., exited_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TaskDelete(_message.Message):
    __slots__ = ("container_id", "exit_status", "exited_at", "id")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    EXITED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    exit_status: int
    exited_at: _timestamp_pb2.Timestamp
    id: str
    def __init__(self, container_id: _Optional[str] = ..., exit_status: _Optional[int] = ..., exited_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[str] = ...) -> None: ...

class TaskOOM(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    def __init__(self, container_id: _Optional[str] = ...) -> None: ...
