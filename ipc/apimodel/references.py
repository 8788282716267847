"""The API objects a pod references, as the kubelet's secret, configmap and token
managers register them: read from the pod's JSON, so the worker that fetches them and
the parent that uses them agree on one list.

- ConfigMaps: ``configMap`` volumes, ``projected`` ``configMap`` sources,
  ``configMapKeyRef`` and ``envFrom`` ``configMapRef`` of every container (init and
  ephemeral ones too);
- Secrets: the same for secrets, plus ``imagePullSecrets`` and an inline CSI volume's
  ``nodePublishSecretRef``;
- PersistentVolumeClaims: ``persistentVolumeClaim`` volumes, and each generic
  ``ephemeral`` volume's claim ``<pod>-<volume>``; CSIDrivers: inline ``csi`` volumes'
  drivers (what a claim leads to, its volume, driver and attachment, is
  ``persistentvolumes.derived``);
- tokens: each ``projected`` ``serviceAccountToken`` source, for the pod's service
  account (``default`` when unset), its audience ("" for the API server's own) and
  lifetime (``expirationSeconds``, 3600 by default).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_TOKEN_SECONDS = 3600
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


class ObjectKind(enum.StrEnum):
    CONFIG_MAP = "ConfigMap"
    SECRET = "Secret"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    PERSISTENT_VOLUME = "PersistentVolume"  # cluster-scoped: its key's namespace is ""
    CSI_DRIVER = "CSIDriver"  # cluster-scoped
    VOLUME_ATTACHMENT = "VolumeAttachment"  # cluster-scoped

    @property
    def noun(self) -> str:
        """As the kubelet's messages name it: ``configmap "x" not found``."""
        return self.value.lower()

    @property
    def storage(self) -> bool:
        """Read whole (``body``) and by GET only, as the node authorizer allows."""
        return self not in (ObjectKind.CONFIG_MAP, ObjectKind.SECRET)


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    kind: ObjectKind
    namespace: str
    name: str


@dataclass(frozen=True, slots=True, order=True)
class TokenKey:
    """One token the kubelet's token manager keeps for a pod."""

    pod_uid: str
    namespace: str
    pod_name: str
    service_account: str
    audience: str
    expiration_seconds: int


@dataclass(frozen=True, slots=True)
class PodReferences:
    objects: frozenset[ObjectKey]
    tokens: frozenset[TokenKey]


def references(pod: Mapping[str, Any]) -> PodReferences:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    namespace = meta.get("namespace") or "default"
    found = {
        ObjectKey(kind, namespace, name)
        for kind, name in (*_volume_objects(spec), *_env_objects(spec), *_pull_secrets(spec))
        if name
    }
    found |= {ObjectKey(*ref) for ref in _storage_objects(meta, spec) if ref[2]}
    tokens = {
        token_key(
            pod,
            str(source.get("audience") or ""),
            int(source.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS),
        )
        for source in _projected_sources(spec, "serviceAccountToken")
    }
    return PodReferences(frozenset(found), frozenset(tokens))


def token_key(pod: Mapping[str, Any], audience: str, expiration_seconds: int) -> TokenKey:
    """The token a pod's ``serviceAccountToken`` source asks for: its service account
    (``default`` when unset), audience and lifetime."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return TokenKey(
        str(meta.get("uid", "")),
        meta.get("namespace") or "default",
        str(meta.get("name", "")),
        spec.get("serviceAccountName") or "default",
        audience,
        expiration_seconds,
    )


def claim_name(pod_name: str, volume: Mapping[str, Any]) -> str:
    """The claim a ``persistentVolumeClaim`` or generic ``ephemeral`` volume uses ("" for
    other volumes): an ephemeral volume's is ``<pod>-<volume>``."""
    if isinstance(volume.get("persistentVolumeClaim"), dict):
        return str(volume["persistentVolumeClaim"].get("claimName") or "")
    if isinstance(volume.get("ephemeral"), dict):
        return f"{pod_name}-{volume.get('name', '')}"
    return ""


def _storage_objects(
    meta: Mapping[str, Any], spec: Mapping[str, Any]
) -> Iterable[tuple[ObjectKind, str, str]]:
    """The claims of the pod's volumes, and its inline CSI volumes' drivers and secrets."""
    namespace = meta.get("namespace") or "default"
    for volume in spec.get("volumes") or ():
        claim = claim_name(str(meta.get("name", "")), volume)
        if claim:
            yield ObjectKind.PERSISTENT_VOLUME_CLAIM, namespace, claim
        inline = volume.get("csi")
        if isinstance(inline, dict):
            yield ObjectKind.CSI_DRIVER, "", str(inline.get("driver") or "")
            secret = inline.get("nodePublishSecretRef") or {}
            if isinstance(secret, dict):
                yield ObjectKind.SECRET, namespace, str(secret.get("name") or "")


def _volume_objects(spec: Mapping[str, Any]) -> Iterable[tuple[ObjectKind, str]]:
    for volume in spec.get("volumes") or ():
        if isinstance(volume.get("configMap"), dict):
            yield ObjectKind.CONFIG_MAP, volume["configMap"].get("name", "")
        if isinstance(volume.get("secret"), dict):
            yield ObjectKind.SECRET, volume["secret"].get("secretName", "")
    for source in _projected_sources(spec, "configMap"):
        yield ObjectKind.CONFIG_MAP, source.get("name", "")
    for source in _projected_sources(spec, "secret"):
        yield ObjectKind.SECRET, source.get("name", "")


def _projected_sources(spec: Mapping[str, Any], kind: str) -> Iterable[Mapping[str, Any]]:
    for volume in spec.get("volumes") or ():
        projected = volume.get("projected")
        if not isinstance(projected, dict):
            continue
        for source in projected.get("sources") or ():
            if isinstance(source, dict) and isinstance(source.get(kind), dict):
                yield source[kind]


def _env_objects(spec: Mapping[str, Any]) -> Iterable[tuple[ObjectKind, str]]:
    for container in _containers(spec):
        for var in container.get("env") or ():
            source = var.get("valueFrom") or {}
            if isinstance(source.get("configMapKeyRef"), dict):
                yield ObjectKind.CONFIG_MAP, source["configMapKeyRef"].get("name", "")
            if isinstance(source.get("secretKeyRef"), dict):
                yield ObjectKind.SECRET, source["secretKeyRef"].get("name", "")
        for entry in container.get("envFrom") or ():
            if isinstance(entry.get("configMapRef"), dict):
                yield ObjectKind.CONFIG_MAP, entry["configMapRef"].get("name", "")
            if isinstance(entry.get("secretRef"), dict):
                yield ObjectKind.SECRET, entry["secretRef"].get("name", "")


def _pull_secrets(spec: Mapping[str, Any]) -> Iterable[tuple[ObjectKind, str]]:
    for entry in spec.get("imagePullSecrets") or ():
        if isinstance(entry, dict):
            yield ObjectKind.SECRET, entry.get("name", "")


def _containers(spec: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for kind in CONTAINER_LISTS:
        for container in spec.get(kind) or ():
            if isinstance(container, dict):
                yield container
