from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class TaskExit(_message.Message):
    __slots__ = ("container_id", "id")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    id: str
    def __init__(self, container_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class TaskDelete(_message.Message):
    __slots__ = ("container_id", "id")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    id: str
    def __init__(self, container_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...
