"""The files of a written volume, made as the kubelet's volume plugins make their payloads.

- ``configMap`` (the plugin's ``MakePayload``): every key of ``data`` and ``binaryData``
  with ``defaultMode``, or only ``items``, each key at its ``path`` with its ``mode``.
  A key the object lacks fails with ``configmap references non-existent config key: k``,
  unless the source is ``optional``.
- ``secret``: the same over the Secret's ``data`` (``references non-existent secret
  key: k``).
- A missing object fails with the API's ``configmap "x" not found``; an ``optional``
  one is an object without keys.
- ``downwardAPI``: each item from a pod field or a container's resources.
- ``serviceAccountToken``: the token for the pod's service account, audience and
  lifetime at ``path``; mode ``defaultMode``, or 0600 when the pod has an ``fsGroup``
  or one ``runAsUser`` for all its containers (which then owns the file), as
  ``collectData`` does.
- ``projected``: every source into one payload; each failing source adds its message,
  and several are shown as the kubelet's aggregate error shows them (``[a, b]``).

An object or token the pod-objects worker has not read yet raises ``Pending``: the pod
waits for it, as the kubelet waits on its GET. Object contents are never logged.
"""

from __future__ import annotations

from pkletd.ipc.apimodel.podspec import Pod
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind, token_key
from pkletd.ipc.apimodel.volumespec import Projection, Volume
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects, ObjectUnavailable
from pkletd.supervisor.pods.setup import downward, securitycontext
from pkletd.supervisor.pods.setup.atomicwriter import FileProjection

Payload = dict[str, FileProjection]
OBJECT_KINDS = {"configMap": ObjectKind.CONFIG_MAP, "secret": ObjectKind.SECRET}
MISSING_KEY = {
    "configMap": "configmap references non-existent config key: {}",
    "secret": "references non-existent secret key: {}",
}
PRIVATE_TOKEN_MODE = 0o600


class SourceFailure(Exception):
    """A source's files cannot be made; the message is the kubelet's."""


class Pending(Exception):
    """An object or token the source needs has not been read yet."""


def aggregate(messages: list[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message alone, several in brackets."""
    return messages[0] if len(messages) == 1 else f"[{', '.join(messages)}]"


class Projector:
    """Makes the payload of one volume of one pod from what ``ApiObjects`` holds."""

    def __init__(self, pod: Pod, node: NodeInfo, objects: ApiObjects) -> None:
        self._pod = pod
        self._node = node
        self._objects = objects

    def payload(self, volume: Volume) -> Payload:
        files: Payload = {}
        failures: list[str] = []
        waits: list[str] = []
        for source in volume.projections:
            try:
                files.update(self._source(source, volume.default_mode))
            except Pending as exc:
                waits.append(str(exc))
            except SourceFailure as exc:
                failures.append(str(exc))
        if waits:
            raise Pending(", ".join(waits))
        if failures:
            raise SourceFailure(aggregate(failures))
        return files

    def _source(self, source: Projection, default_mode: int) -> Payload:
        if source.kind == "downwardAPI":
            return self._downward(source, default_mode)
        if source.kind == "serviceAccountToken":
            return self._token(source, default_mode)
        if source.kind in OBJECT_KINDS:
            return self._keys(source, default_mode)
        raise SourceFailure(f"pkletd does not serve {source.kind} projections")

    def _downward(self, source: Projection, default_mode: int) -> Payload:
        files = {}
        for item in source.items:
            try:
                if item.resource is not None:
                    text = downward.resource_value(self._pod, "", item.resource, self._node)
                else:
                    text = downward.field_value(self._pod, item.field_path)
            except LookupError as exc:
                raise SourceFailure(str(exc)) from exc
            mode = default_mode if item.mode is None else item.mode
            files[item.path] = FileProjection(text.encode(), mode)
        return files

    def _keys(self, source: Projection, default_mode: int) -> Payload:
        values = self._values(source)
        if not source.items:
            return {key: FileProjection(data, default_mode) for key, data in values.items()}
        files = {}
        for item in source.items:
            if item.key not in values:
                if source.optional:
                    continue
                raise SourceFailure(MISSING_KEY[source.kind].format(item.key))
            mode = default_mode if item.mode is None else item.mode
            files[item.path] = FileProjection(values[item.key], mode)
        return files

    def _values(self, source: Projection) -> dict[str, bytes]:
        """The object's keys and contents; none for a missing optional one."""
        key = ObjectKey(OBJECT_KINDS[source.kind], self._pod.namespace, source.name)
        try:
            found = self._objects.get(key)
        except ObjectUnavailable as exc:
            if exc.pending:
                raise Pending(f'{key.kind.noun} "{key.name}"') from exc
            if exc.missing and source.optional:
                return {}
            raise SourceFailure(str(exc)) from exc
        return object_files(found)

    def _token(self, source: Projection, default_mode: int) -> Payload:
        key = token_key(self._pod.raw, source.audience, source.expiration_seconds)
        try:
            token = self._objects.token(key)
        except ObjectUnavailable as exc:
            if exc.pending:
                raise Pending("a service account token") from exc
            raise SourceFailure(str(exc)) from exc
        owner = fs_user(self._pod)
        group = securitycontext.pod_security(self._pod).fs_group
        mode = PRIVATE_TOKEN_MODE if owner is not None or group is not None else default_mode
        return {source.items[0].path: FileProjection(token.encode(), mode, owner)}


def object_files(found: ObjectFetched) -> dict[str, bytes]:
    """A ConfigMap's ``data`` and ``binaryData``, or a Secret's ``data``, as file contents."""
    files = {key: text.encode() for key, text in found.strings.items()}
    files.update(found.data)
    return files


def fs_user(pod: Pod) -> int | None:
    """``FsUserFrom``: the one ``runAsUser`` every container (init and regular) runs
    with, if they all set the same; else None."""
    users = {
        securitycontext.effective(pod, c).run_as_user
        for c in (*pod.init_containers, *pod.containers)
    }
    if len(users) != 1:
        return None
    return users.pop()
