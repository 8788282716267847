"""Image pulls: the kubelet's EnsureImageExists, its events and its pull back-off.

``ImagePuller.ensure`` gets a container's image by its pull policy (present and
not ``Always``: used as is; ``Never`` and absent: ``ErrImageNeverPull``; else a
pull) and records the kubelet's events (``Pulling``, ``Pulled``, ``Failed``,
``ErrImageNeverPull``). A failed pull is ``ErrImagePull`` and starts the image's
back-off for that pod (10 s doubling to 300 s, as CrashLoopBackOff), during
which ``backoff_left`` is what the container waits with ``ImagePullBackOff``.
Called on pod-worker threads; one pod's syncs never overlap.
"""

from __future__ import annotations

import logging
import time

from pkletd.ipc.apimodel.podspec import Container, Pod, PodUID
from pkletd.ipc.cri import CriError, ImageInfo, SandboxSpec
from pkletd.supervisor.pods.backoff import Clock, CrashBackoff
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason, go_duration
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podstartup import PodStartup
from pkletd.supervisor.pods.runtime import Runtime
from pkletd.supervisor.pods.types import Waiting, WaitingReason

log = logging.getLogger(__name__)


class ImagePuller:
    def __init__(
        self,
        runtime: Runtime,
        events: EventRecorder,
        objects: ApiObjects,
        startup: PodStartup,
        clock: Clock = time.time,
    ) -> None:
        self._runtime = runtime
        self._startup = startup  # told when a pod's pulls start and end
        self._objects = objects  # where pull secrets are read
        self._events = events
        self._backoff = CrashBackoff(clock=clock)
        self._failed_at: dict[str, float] = {}  # "<pod uid>/<image>" -> when its pull failed
        self._clock = clock

    def backoff_left(self, pod: Pod, container: Container) -> float:
        """Seconds before the container's image may be pulled again for this pod."""
        key = _key(pod.uid, container.image)
        failed_at = self._failed_at.get(key)
        return self._backoff.remaining(key, failed_at) if failed_at is not None else 0.0

    def backing_off(self, pod: Pod, container: Container) -> Waiting:
        """Record the back-off event; what the container waits with."""
        message = f'Back-off pulling image "{container.image}"'
        self._events.normal(ObjectRef.of(pod, container.name), Reason.BACK_OFF, message)
        return Waiting(WaitingReason.IMAGE_PULL_BACK_OFF, message)

    def ensure(self, pod: Pod, container: Container, sandbox: SandboxSpec) -> ImageInfo | Waiting:
        """The container's image, or why it cannot be had."""
        image = container.image
        where = ObjectRef.of(pod, container.name)
        if container.image_pull_policy != "Always":
            present = self._runtime.image_status(image)
            if present is not None:
                message = f'Container image "{image}" already present on machine'
                self._events.normal(where, Reason.PULLED, message)
                return present
        if container.image_pull_policy == "Never":
            message = f'Container image "{image}" is not present with pull policy of Never'
            self._events.warning(where, Reason.ERR_IMAGE_NEVER_PULL, message)
            return Waiting(WaitingReason.ERR_IMAGE_NEVER_PULL, message)
        try:
            return self._pull(pod.uid, where, image, sandbox)
        except CriError as exc:
            log.error(
                "image pull failed pod=%s container=%s error=%s", pod.full_name, container.name, exc
            )
            key = _key(pod.uid, image)
            self._backoff.restarted(key)
            self._failed_at[key] = self._clock()
            return Waiting(WaitingReason.ERR_IMAGE_PULL, exc.rpc_message)

    def forget(self, uid: PodUID) -> None:
        self._backoff.forget_pod(uid)
        self._failed_at = {k: v for k, v in self._failed_at.items() if not k.startswith(f"{uid}/")}

    def _pull(self, uid: PodUID, where: ObjectRef, image: str, sandbox: SandboxSpec) -> ImageInfo:
        self._events.normal(where, Reason.PULLING, f'Pulling image "{image}"')
        self._startup.pull_started(uid)
        started = time.monotonic()
        try:
            self._runtime.pull_image(image, sandbox)
        except CriError as exc:
            message = f'Failed to pull image "{image}": {exc.rpc_message}'
            self._events.warning(where, Reason.FAILED, message)
            raise
        pulled = self._runtime.image_status(image)
        if pulled is None:  # removed again at once (image GC): the next sync pulls again
            raise CriError("ImageStatus", image, "NOT_FOUND", "image gone after pull")
        self._startup.pull_finished(uid)
        took = go_duration(time.monotonic() - started)
        message = (
            f'Successfully pulled image "{image}" in {took} ({took} including waiting). '
            f"Image size: {pulled.size} bytes."
        )
        self._events.normal(where, Reason.PULLED, message)
        return pulled


def _key(uid: PodUID, image: str) -> str:
    return f"{uid}/{image}"
