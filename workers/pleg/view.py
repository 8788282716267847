"""What PLEG reads of the runtime: every pod's objects at once (a relist), or one object
named by a runtime event.

Both give PLEG's view: object key (a container's id, or ``SANDBOX_PREFIX`` and a
sandbox's id) -> state, and object key -> its pod's UID, and each container as listed
(for its exit, ``exits``). Objects with no pod UID label are not pods' and are left out,
in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import SANDBOX_PREFIX
from pkletd.ipc.runtime.cri import ContainerInfo, SandboxInfo


class PlegRuntime(Protocol):
    """What PLEG asks of the runtime (``CriRuntime`` is the real one)."""

    def list_sandboxes(self) -> list[SandboxInfo]: ...

    def list_containers(self) -> list[ContainerInfo]: ...

    def find_sandbox(self, sandbox_id: str) -> SandboxInfo | None: ...

    def find_container(self, container_id: str) -> ContainerInfo | None: ...

    def container_status(self, listed: ContainerInfo) -> ContainerInfo: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class View:
    states: dict[str, str]
    owners: dict[str, PodUID]
    containers: dict[str, ContainerInfo] = field(default_factory=dict)


def list_all(runtime: PlegRuntime) -> View:
    """Every pod's sandboxes and containers."""
    view = View({}, {})
    for sandbox in runtime.list_sandboxes():
        if sandbox.uid:
            _add(view, SANDBOX_PREFIX + sandbox.id, sandbox.state.value, sandbox.uid)
    for container in runtime.list_containers():
        if container.pod_uid:
            _add(view, container.id, container.state.value, container.pod_uid)
            view.containers[container.id] = container
    return view


def read_one(runtime: PlegRuntime, object_id: str, sandbox: bool | None) -> View:
    """The object ``object_id`` now: a sandbox's (``sandbox`` True), a container's
    (False), or either, the container tried first (None: PLEG does not know it yet).
    An object PLEG knows and the runtime no longer has is absent from the view."""
    view = View({}, {})
    if sandbox is not True:
        container = runtime.find_container(object_id)
        if container is not None or sandbox is False:
            if container is not None and container.pod_uid:
                _add(view, container.id, container.state.value, container.pod_uid)
                view.containers[container.id] = container
            return view
    found = runtime.find_sandbox(object_id)
    if found is not None and found.uid:
        _add(view, SANDBOX_PREFIX + found.id, found.state.value, found.uid)
    return view


def _add(view: View, key: str, state: str, owner: PodUID) -> None:
    view.states[key] = state
    view.owners[key] = owner
