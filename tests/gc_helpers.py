"""Pods and their container instances in a ``FakeRuntime``, for the garbage collection
unit tests (the image-gc worker's decisions and the parent's check and removal)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.runtime.cri import SandboxID, SandboxSpec
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.setup import runtimespec

IMAGE = "busybox:1.36"


@dataclass
class FakePod:
    """A pod and the sandbox its containers are created in."""

    runtime: FakeRuntime
    pod: Pod
    sandbox: SandboxID
    spec: SandboxSpec

    def instances(self, count: int, name: str = "app", last_runs: bool = True) -> list[str]:
        """``count`` instances of the container, the oldest first, each with its log file;
        all but the last have exited (the last too unless ``last_runs``)."""
        container = next(c for c in self.pod.containers if c.name == name)
        made = []
        for attempt in range(count):
            spec = runtimespec.container_spec(self.pod, container, attempt)
            container_id = self.runtime.create_container(self.sandbox, spec, self.spec)
            self.runtime.start_container(container_id)
            if attempt < count - 1 or not last_runs:
                self.runtime.exit(container_id, 1)
            log = Path(self.runtime.log_paths[container_id])
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"instance {attempt}\n")
            made.append(str(container_id))
        return made

    def new_sandbox(self, attempt: int) -> SandboxID:
        """The pod's sandbox is replaced: the old one stops, containers go in the new one."""
        self.runtime.stop_sandbox(self.sandbox)
        logs = Path(self.spec.log_directory).parent
        self.spec = runtimespec.sandbox_spec(self.pod, attempt, logs)
        self.sandbox = self.runtime.run_sandbox(self.spec)
        return self.sandbox


def pod_raw(uid: str, name: str = "web", images: tuple[str, ...] = (IMAGE,)) -> dict[str, object]:
    containers = [
        {"name": "app" if i == 0 else f"app{i}", "image": image} for i, image in enumerate(images)
    ]
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"containers": containers},
    }


def run_pod(
    runtime: FakeRuntime,
    logs: Path,
    uid: str,
    name: str = "web",
    images: tuple[str, ...] = (IMAGE,),
) -> FakePod:
    """A pod with a ready sandbox and no container yet."""
    pod = parse_pod(pod_raw(uid, name, images))
    runtime.images.update(images)
    spec = runtimespec.sandbox_spec(pod, 0, logs)
    return FakePod(runtime, pod, runtime.run_sandbox(spec), spec)
