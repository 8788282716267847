"""Image pulls: the kubelet's EnsureImageExists, its events and its pull back-off.

``ImagePuller.ensure`` gets a container's image by its pull policy (present and
not ``Always``: used as is; ``Never`` and absent: ``ErrImageNeverPull``; else a
pull) and records the kubelet's events (``Pulling``, ``Pulled``, ``Failed``,
``ErrImageNeverPull``). A failed pull is ``ErrImagePull`` and starts the image's
back-off for that pod (10 s doubling to 300 s, as CrashLoopBackOff), during
which ``backoff_left`` is what the container waits with ``ImagePullBackOff``.

A pull reads the pod's image pull secrets (``pullsecrets``): it waits while one is not
read yet, warns ``FailedToRetrieveImagePullSecret`` for those the API does not have, and
tries each credential that fits the image (``keyring``) in turn as the CRI ``AuthConfig``,
the secrets' first and then the node's (its credential provider plugins, as the kubelet's
union keyring orders them), or none when none fits. Logs name the registry and the secret
or provider, never a credential. Called on pod-worker threads; one pod's syncs never
overlap, and a provider plugin runs on the pulling thread.
"""

from __future__ import annotations

import logging
import time

from pkletd.ipc.apimodel.podenums import PullPolicy
from pkletd.ipc.apimodel.podspec import Container, Pod, PodUID
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.runtime.cri import CriError, ImageInfo, RegistryAuth, SandboxSpec
from pkletd.supervisor.pods import pullsecrets
from pkletd.supervisor.pods.backoff import CrashBackoff
from pkletd.supervisor.pods.dockerconfig import BadPullSecret
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason, go_duration
from pkletd.supervisor.pods.keyring import NO_NODE_CREDENTIALS, Credential, NodeCredentials
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podstartup import PodStartup
from pkletd.supervisor.pods.pullsecrets import PullSecrets
from pkletd.supervisor.pods.runtime import Runtime
from pkletd.supervisor.pods.types import Waiting, WaitingReason

log = logging.getLogger(__name__)


class PullFailed(Exception):
    """No attempt to pull the image worked; ``str()`` is the kubelet's message."""


class ImagePuller:
    def __init__(
        self,
        runtime: Runtime,
        events: EventRecorder,
        objects: ApiObjects,
        startup: PodStartup,
        clock: Clock = SYSTEM_CLOCK,
        node_credentials: NodeCredentials = NO_NODE_CREDENTIALS,
    ) -> None:
        self._runtime = runtime
        self._node_credentials = node_credentials  # credential provider plugins
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
        if container.image_pull_policy is not PullPolicy.ALWAYS:
            present = self._runtime.image_status(image)
            if present is not None:
                message = f'Container image "{image}" already present on machine'
                self._events.normal(where, Reason.PULLED, message)
                return present
        if container.image_pull_policy is PullPolicy.NEVER:
            message = f'Container image "{image}" is not present with pull policy of Never'
            self._events.warning(where, Reason.ERR_IMAGE_NEVER_PULL, message)
            return Waiting(WaitingReason.ERR_IMAGE_NEVER_PULL, message)
        secrets = pullsecrets.read(self._objects, pod)
        if secrets.pending:  # not an error: the container waits as it is, ContainerCreating
            log.debug("image pull waits pod=%s secrets=%s", pod.full_name, secrets.pending)
            return Waiting(WaitingReason.CONTAINER_CREATING, "")
        if secrets.unavailable:
            log.info(
                "pull secrets unavailable pod=%s secrets=%s", pod.full_name, secrets.unavailable
            )
            self._events.warning(
                ObjectRef.of(pod),
                Reason.FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET,
                secrets.unavailable_message,
            )
        try:
            return self._pull(pod.uid, where, image, sandbox, secrets)
        except PullFailed as exc:
            log.error(
                "image pull failed pod=%s container=%s error=%s", pod.full_name, container.name, exc
            )
            key = _key(pod.uid, image)
            self._backoff.restarted(key)
            self._failed_at[key] = self._clock.time()
            return Waiting(WaitingReason.ERR_IMAGE_PULL, str(exc))

    def forget(self, uid: PodUID) -> None:
        self._backoff.forget_pod(uid)
        self._failed_at = {k: v for k, v in self._failed_at.items() if not k.startswith(f"{uid}/")}

    def _pull(
        self, uid: PodUID, where: ObjectRef, image: str, sandbox: SandboxSpec, secrets: PullSecrets
    ) -> ImageInfo:
        self._events.normal(where, Reason.PULLING, f'Pulling image "{image}"')
        self._startup.pull_started(uid)
        started = time.monotonic()
        try:
            self._pull_with_credentials(image, sandbox, secrets)
        except PullFailed as exc:
            self._events.warning(where, Reason.FAILED, f'Failed to pull image "{image}": {exc}')
            raise
        try:
            pulled = self._runtime.image_status(image)
        except CriError as exc:
            raise PullFailed(exc.rpc_message) from exc
        if pulled is None:  # removed again at once (image GC): the next sync pulls again
            gone = CriError("ImageStatus", image, "NOT_FOUND", "image gone after pull")
            raise PullFailed(gone.rpc_message)
        self._startup.pull_finished(uid)
        took = go_duration(time.monotonic() - started)
        message = (
            f'Successfully pulled image "{image}" in {took} ({took} including waiting). '
            f"Image size: {pulled.size} bytes."
        )
        self._events.normal(where, Reason.PULLED, message)
        return pulled

    def _pull_with_credentials(
        self, image: str, sandbox: SandboxSpec, secrets: PullSecrets
    ) -> None:
        """The kubelet's PullImage: with each credential that fits the image in turn until one
        works (the pod's secrets', then the node's), or anonymously when none fits."""
        try:
            credentials = secrets.keyring().lookup(image)
        except BadPullSecret as exc:
            raise PullFailed(str(exc)) from exc
        credentials += self._node_credentials.lookup(image)
        attempts: list[Credential | None] = [*credentials] or [None]
        errors: list[str] = []
        for credential in attempts:
            auth = RegistryAuth(credential.username, credential.password) if credential else None
            try:
                self._runtime.pull_image(image, sandbox, auth)
                return
            except CriError as exc:
                errors.append(exc.rpc_message)
                if credential is not None:
                    log.warning(
                        "image pull failed with credentials image=%s registry=%s %s",
                        image,
                        credential.registry,
                        _source(credential),
                    )
        raise PullFailed(_aggregate(errors))


def _source(credential: Credential) -> str:
    """Where a credential came from, as a log field."""
    if credential.provider:
        return f"provider={credential.provider}"
    return f"secret={credential.secret}"


def _aggregate(errors: list[str]) -> str:
    """Several errors as the kubelet's aggregate error prints them: each once, in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"


def _key(uid: PodUID, image: str) -> str:
    return f"{uid}/{image}"
