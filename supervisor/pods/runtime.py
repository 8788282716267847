"""The seam between the pod logic and the container runtime: what the parent asks of it.

``CriRuntime`` (``pkletd.ipc.runtime.cri``) is the real one, over CRI; ``FakeRuntime``
(``fakeruntime``) keeps pods in memory for unit tests and injects errors. The
agent assigns the real one to a ``Runtime``, so the type checker proves it fits;
``fakeruntime`` does the same for the fake.
"""

from __future__ import annotations

from typing import Protocol

from pkletd.ipc.runtime.cri import (
    ContainerID,
    ContainerInfo,
    ContainerSpec,
    ContainerState,
    ExecResult,
    ImageInfo,
    RegistryAuth,
    SandboxID,
    SandboxInfo,
    SandboxSpec,
)


class Runtime(Protocol):
    def version(self) -> str: ...

    def list_sandboxes(self, pod_uid: str = "") -> list[SandboxInfo]: ...

    def sandbox_status(self, sandbox_id: SandboxID) -> SandboxInfo: ...

    def list_containers(self, pod_uid: str = "") -> list[ContainerInfo]: ...

    def container_status(self, listed: ContainerInfo) -> ContainerInfo: ...

    def container_state(self, container_id: ContainerID) -> ContainerState: ...

    def container_log_path(self, container_id: str) -> str: ...

    def image_status(self, image: str) -> ImageInfo | None: ...

    def exec_sync(
        self, container_id: str, command: tuple[str, ...], timeout_s: int
    ) -> ExecResult: ...

    def pull_image(
        self, image: str, sandbox: SandboxSpec, auth: RegistryAuth | None = None
    ) -> None: ...

    def run_sandbox(self, spec: SandboxSpec) -> SandboxID: ...

    def stop_sandbox(self, sandbox_id: SandboxID) -> None: ...

    def remove_sandbox(self, sandbox_id: SandboxID) -> None: ...

    def create_container(
        self, sandbox_id: SandboxID, spec: ContainerSpec, sandbox: SandboxSpec
    ) -> ContainerID: ...

    def start_container(self, container_id: ContainerID) -> None: ...

    def stop_container(self, container_id: ContainerID, grace_s: int) -> None: ...

    def remove_container(self, container_id: ContainerID) -> None: ...

    def remove_image(self, image_id: str) -> None: ...

    def close(self) -> None: ...
