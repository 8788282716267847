"""A runtime in memory, for unit tests: it records every call and can fail any of them.

It keeps sandboxes, containers and images as a CRI runtime would report them
(states, attempts, the kubelet's labels it was given, nanosecond times from its
own counter), so the pod syncer, the inspector and the killer run against it
unchanged::

    runtime = FakeRuntime(images={"busybox:1.36"})
    runtime.fail("StartContainer", "UNKNOWN", "exec format error")  # the next call fails
    ...
    assert [c.method for c in runtime.calls] == ["RunPodSandbox", ...]

Besides the parent's ``Runtime`` it answers what PLEG and the log rotator read
(``find_sandbox``, ``find_container``, ``reopen_container_log``), so their tests use it
too. Containers do not exit by themselves: ``exit(container_id, code)`` does it. An image
is known by its name; its id is ``sha256:<name>``, its size ``image_sizes`` says (1024 by
default), and it is pinned if ``pinned`` names it.
"""

from __future__ import annotations

import dataclasses
import itertools
import os.path
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from pkletd.ipc.runtime.cri import (
    POD_UID_LABEL,
    ContainerID,
    ContainerInfo,
    ContainerSpec,
    ContainerState,
    CriError,
    ExecResult,
    FilesystemUsage,
    ImageInfo,
    ListedImage,
    RegistryAuth,
    SandboxID,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
)
from pkletd.supervisor.pods.runtime import Runtime

POD_IP = "10.88.0.2"
IMAGE_SIZE = 1024
IMAGE_FS = "/fake/imagefs"  # the mount point ImageFsInfo names


@dataclass(frozen=True, slots=True)
class Call:
    method: str  # the CRI method's name: "RunPodSandbox", "StartContainer", ...
    target: str  # what it named: a sandbox or container id, an image, a pod uid ("" for all)


class FakeRuntime(Runtime):  # declared, so the type checker proves it fits
    def __init__(self, images: Iterable[str] = ()) -> None:
        self.calls: list[Call] = []
        self.sandboxes: dict[SandboxID, SandboxInfo] = {}
        self.containers: dict[ContainerID, ContainerInfo] = {}
        self.images = set(images)
        self.image_sizes: dict[str, int] = {}
        self.pinned: set[str] = set()
        self.sandbox_image_name = ""  # what the verbose Status would say
        self.log_paths: dict[ContainerID, str] = {}
        self.specs: dict[ContainerID, ContainerSpec] = {}  # what each container was created from
        self.pulls: list[tuple[str, RegistryAuth | None]] = []  # each PullImage's image and auth
        self.closed = False
        self._failures: dict[str, list[CriError]] = {}
        self._clock = itertools.count(1_700_000_000_000_000_000, 1_000_000)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # pod workers call it from several threads

    # --- for the test ------------------------------------------------------------

    def fail(self, method: str, code: str = "UNKNOWN", detail: str = "injected") -> None:
        """Make the next call of ``method`` raise ``CriError`` with this code."""
        self._failures.setdefault(method, []).append(CriError(method, "fake", code, detail))

    def exit(self, container_id: ContainerID, exit_code: int = 0) -> None:
        """The container's process ends, as if by itself."""
        self._finish(container_id, exit_code, "Completed" if exit_code == 0 else "Error")

    def methods(self) -> list[str]:
        return [c.method for c in self.calls]

    # --- reading -----------------------------------------------------------------

    def version(self) -> str:
        self._record("Version", "runtime")
        return "fake 0.0.0"

    def list_sandboxes(self, pod_uid: str = "") -> list[SandboxInfo]:
        self._record("ListPodSandbox", pod_uid)
        return [s for s in self.sandboxes.values() if pod_uid in ("", s.uid)]

    def sandbox_status(self, sandbox_id: SandboxID) -> SandboxInfo:
        self._record("PodSandboxStatus", sandbox_id)
        return self._sandbox(sandbox_id, "PodSandboxStatus")

    def list_containers(self, pod_uid: str = "") -> list[ContainerInfo]:
        self._record("ListContainers", pod_uid)
        return [c for c in self.containers.values() if pod_uid in ("", c.pod_uid)]

    def find_sandbox(self, sandbox_id: str) -> SandboxInfo | None:
        self._record("ListPodSandbox", sandbox_id)
        return self.sandboxes.get(SandboxID(sandbox_id))

    def find_container(self, container_id: str) -> ContainerInfo | None:
        self._record("ListContainers", container_id)
        return self.containers.get(ContainerID(container_id))

    def container_status(self, listed: ContainerInfo) -> ContainerInfo:
        self._record("ContainerStatus", listed.id)
        return self._container(listed.id, "ContainerStatus")

    def container_state(self, container_id: ContainerID) -> ContainerState:
        self._record("ContainerStatus", container_id)
        return self._container(container_id, "ContainerStatus").state

    def container_log_path(self, container_id: str) -> str:
        self._record("ContainerStatus", container_id)
        self._container(ContainerID(container_id), "ContainerStatus")
        return self.log_paths[ContainerID(container_id)]

    def image_status(self, image: str) -> ImageInfo | None:
        self._record("ImageStatus", image)
        if image not in self.images:
            return None
        return ImageInfo(f"sha256:{image}", 0, size=self.image_sizes.get(image, IMAGE_SIZE))

    def list_images(self) -> list[ListedImage]:
        self._record("ListImages", "")
        return [
            ListedImage(
                f"sha256:{name}",
                (name,),
                (),
                self.image_sizes.get(name, IMAGE_SIZE),
                name in self.pinned,
            )
            for name in sorted(self.images)
        ]

    def image_fs_info(self) -> list[FilesystemUsage]:
        self._record("ImageFsInfo", "")
        return [FilesystemUsage(next(self._clock), IMAGE_FS, None, None)]

    def sandbox_image(self) -> str:
        self._record("Status", "runtime")
        return self.sandbox_image_name

    def reopen_container_log(self, container_id: str) -> None:
        """As containerd does it: a fresh, empty file at the container's log path."""
        self._record("ReopenContainerLog", container_id)
        path = self.log_paths.get(ContainerID(container_id))
        if path is None:
            raise CriError("ReopenContainerLog", container_id, "NOT_FOUND", "no log path")
        open(path, "a").close()

    def exec_sync(self, container_id: str, command: tuple[str, ...], timeout_s: int) -> ExecResult:
        self._record("ExecSync", container_id)
        return ExecResult(0, b"", b"")

    # --- writing -----------------------------------------------------------------

    def pull_image(
        self, image: str, sandbox: SandboxSpec, auth: RegistryAuth | None = None
    ) -> None:
        self.pulls.append((image, auth))
        self._record("PullImage", image)
        self.images.add(image)

    def run_sandbox(self, spec: SandboxSpec) -> SandboxID:
        self._record("RunPodSandbox", spec.uid)
        sandbox_id = SandboxID(f"sandbox-{next(self._ids)}")
        with self._lock:
            self.sandboxes[sandbox_id] = SandboxInfo(
                id=sandbox_id,
                name=spec.name,
                namespace=spec.namespace,
                uid=spec.uid,
                attempt=spec.attempt,
                state=SandboxState.READY,
                created_at=next(self._clock),
                labels=dict(spec.labels),
                annotations=dict(spec.annotations),
                ip="" if spec.host_network else POD_IP,
                host_network=spec.host_network,
                runtime_handler=spec.runtime_handler,
            )
        return sandbox_id

    def stop_sandbox(self, sandbox_id: SandboxID) -> None:
        self._record("StopPodSandbox", sandbox_id)
        sandbox = self._sandbox(sandbox_id, "StopPodSandbox")
        for container in list(self.containers.values()):
            if container.sandbox_id == sandbox_id and container.state is ContainerState.RUNNING:
                self._finish(container.id, 137, "Error")
        with self._lock:
            self.sandboxes[sandbox_id] = dataclasses.replace(sandbox, state=SandboxState.NOTREADY)

    def remove_sandbox(self, sandbox_id: SandboxID) -> None:
        self._record("RemovePodSandbox", sandbox_id)
        self._sandbox(sandbox_id, "RemovePodSandbox")
        with self._lock:
            del self.sandboxes[sandbox_id]
            for container_id in [c.id for c in self.containers.values()]:
                if self.containers[container_id].sandbox_id == sandbox_id:
                    del self.containers[container_id]

    def create_container(
        self, sandbox_id: SandboxID, spec: ContainerSpec, sandbox: SandboxSpec
    ) -> ContainerID:
        self._record("CreateContainer", sandbox_id)
        self._sandbox(sandbox_id, "CreateContainer")
        container_id = ContainerID(f"{spec.name}-{next(self._ids)}")
        with self._lock:
            self.containers[container_id] = ContainerInfo(
                id=container_id,
                sandbox_id=sandbox_id,
                name=spec.name,
                attempt=spec.attempt,
                state=ContainerState.CREATED,
                created_at=next(self._clock),
                image=spec.image,
                image_ref=f"sha256:{spec.image}",
                labels={**spec.labels, POD_UID_LABEL: sandbox.uid},
                annotations=dict(spec.annotations),
            )
            self.log_paths[container_id] = os.path.join(sandbox.log_directory, spec.log_path)
            self.specs[container_id] = spec
        return container_id

    def start_container(self, container_id: ContainerID) -> None:
        self._record("StartContainer", container_id)
        container = self._container(container_id, "StartContainer")
        started = dataclasses.replace(
            container, state=ContainerState.RUNNING, started_at=next(self._clock)
        )
        with self._lock:
            self.containers[container_id] = started

    def stop_container(self, container_id: ContainerID, grace_s: int) -> None:
        self._record("StopContainer", container_id)
        if self._container(container_id, "StopContainer").state is ContainerState.RUNNING:
            self._finish(container_id, 137, "Error")

    def remove_container(self, container_id: ContainerID) -> None:
        self._record("RemoveContainer", container_id)
        self._container(container_id, "RemoveContainer")
        with self._lock:
            del self.containers[container_id]

    def remove_image(self, image_id: str) -> None:
        self._record("RemoveImage", image_id)
        name = image_id.removeprefix("sha256:")
        if name not in self.images:
            raise CriError("RemoveImage", image_id, "NOT_FOUND", f"image {image_id} not found")
        with self._lock:
            self.images.discard(name)

    def close(self) -> None:
        self.closed = True

    # --- inside ------------------------------------------------------------------

    def _record(self, method: str, target: str) -> None:
        with self._lock:
            self.calls.append(Call(method, target))
            pending = self._failures.get(method)
            if pending:
                raise pending.pop(0)

    def _sandbox(self, sandbox_id: SandboxID, method: str) -> SandboxInfo:
        found = self.sandboxes.get(sandbox_id)
        if found is None:
            raise CriError(method, sandbox_id, "NOT_FOUND", f"sandbox {sandbox_id} not found")
        return found

    def _container(self, container_id: ContainerID, method: str) -> ContainerInfo:
        found = self.containers.get(container_id)
        if found is None:
            raise CriError(method, container_id, "NOT_FOUND", f"container {container_id} not found")
        return found

    def _finish(self, container_id: ContainerID, exit_code: int, reason: str) -> None:
        with self._lock:
            container = self.containers[container_id]
            self.containers[container_id] = dataclasses.replace(
                container,
                state=ContainerState.EXITED,
                finished_at=next(self._clock),
                exit_code=exit_code,
                reason=reason,
            )
