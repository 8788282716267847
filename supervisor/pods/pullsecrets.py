"""A pod's image pull secrets, read from the parent's ``ApiObjects`` as the kubelet's
``getPullSecretsForPod`` reads them, and made into one keyring as its
``MakeDockerKeyring`` makes it.

``imagePullSecrets`` are read in order (the API server's ServiceAccount admission
copied the service account's there when the pod named none). A secret not read yet is
*pending*: the pull waits for it. One the API does not have, or could not give, is
*unavailable*: the pull goes on without it, after the kubelet's warning
``FailedToRetrieveImagePullSecret``. A secret that cannot be read as a docker config
fails the whole keyring, as in the kubelet, and so the pull.
"""

from __future__ import annotations

from dataclasses import dataclass

from pkletd.ipc.apimodel.podspec import Pod
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.supervisor.pods import dockerconfig
from pkletd.supervisor.pods.keyring import Keyring
from pkletd.supervisor.pods.objects import ApiObjects, ObjectUnavailable


@dataclass(frozen=True, slots=True)
class PullSecrets:
    found: tuple[ObjectFetched, ...] = ()
    pending: tuple[str, ...] = ()  # names
    unavailable: tuple[str, ...] = ()

    @property
    def unavailable_message(self) -> str:
        """The kubelet's ``FailedToRetrieveImagePullSecret`` message."""
        names = ", ".join(self.unavailable)
        return (
            f"Unable to retrieve some image pull secrets ({names}); "
            "attempting to pull the image may not succeed."
        )

    def keyring(self) -> Keyring:
        """Every found secret's entries; ``dockerconfig.BadPullSecret`` if one is unreadable."""
        keyring = Keyring()
        for secret in self.found:
            keyring.add(
                secret.name, dockerconfig.entries(secret.name, secret.secret_type, secret.data)
            )
        return keyring


def read(objects: ApiObjects, pod: Pod) -> PullSecrets:
    found: list[ObjectFetched] = []
    pending: list[str] = []
    unavailable: list[str] = []
    for name in pod.image_pull_secrets:
        try:
            found.append(objects.get(ObjectKey(ObjectKind.SECRET, pod.namespace, name)))
        except ObjectUnavailable as exc:
            (pending if exc.pending else unavailable).append(name)
    return PullSecrets(tuple(found), tuple(pending), tuple(unavailable))
