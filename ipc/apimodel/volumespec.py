"""A pod's ``volumes`` and a container's ``volumeMounts``, checked as the API server does.

Every volume is parsed and checked; pkletd serves ``emptyDir``, ``hostPath``,
``downwardAPI``, ``configMap``, ``secret`` and ``projected`` (its ``downwardAPI``,
``configMap``, ``secret`` and ``serviceAccountToken`` sources), and the claims
(``persistentVolumeClaim``, generic ``ephemeral``) and inline ``csi`` volumes whose
storage is a CSI driver's, in ``supervisor/pods/setup/``. The other projected sources are
parsed so the supervisor can report them the kubelet's way; any other volume type is
carried by its name only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pkletd.ipc.apimodel import envspec, persistentvolumes, quantity
from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel.envspec import ResourceRef
from pkletd.ipc.apimodel.fieldcheck import InvalidField
from pkletd.ipc.apimodel.persistentvolumes import CsiSource
from pkletd.ipc.apimodel.references import DEFAULT_TOKEN_SECONDS

HOST_PATH_TYPES = (
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
)
PROPAGATIONS = ("None", "HostToContainer", "Bidirectional")
RECURSIVE_READ_ONLY = ("Disabled", "IfPossible", "Enabled")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DEFAULT_MODE = 0o644
MIN_TOKEN_SECONDS = 600  # the API's bounds on a projected token's expirationSeconds
MAX_TOKEN_SECONDS = 2**32
_PROJECTION_KINDS = (
    "downwardAPI",
    "configMap",
    "secret",
    "serviceAccountToken",
    "clusterTrustBundle",
    "podCertificate",
)


@dataclass(frozen=True, slots=True)
class FileItem:
    """One file of a projection: from a pod field, a resource, or a key of an API object."""

    path: str
    mode: int | None = None
    field_path: str = ""
    resource: ResourceRef | None = None
    key: str = ""


@dataclass(frozen=True, slots=True)
class Projection:
    """One source of files: a downward API list, an API object (configMap, secret: all
    its keys, or ``items``), or a service account token (one item: its ``path``)."""

    kind: str  # one of _PROJECTION_KINDS
    items: tuple[FileItem, ...] = ()
    name: str = ""  # the object's name (configMap, secret)
    optional: bool = False
    audience: str = ""  # serviceAccountToken: "" is the API server's own
    expiration_seconds: int = DEFAULT_TOKEN_SECONDS  # serviceAccountToken


@dataclass(frozen=True, slots=True)
class Volume:
    name: str
    kind: str  # the volume source's field name: "emptyDir", "hostPath", "projected", ...
    medium: str = ""  # emptyDir
    size_limit: Fraction | None = None  # emptyDir
    path: str = ""  # hostPath
    path_type: str = ""  # hostPath
    default_mode: int = DEFAULT_MODE  # files written by pkletd
    projections: tuple[Projection, ...] = ()  # downwardAPI, projected, configMap, secret
    claim_name: str = ""  # persistentVolumeClaim (an ephemeral volume's is <pod>-<volume>)
    read_only: bool = False  # persistentVolumeClaim, csi
    csi: CsiSource | None = None  # csi (inline): its handle is made per pod


@dataclass(frozen=True, slots=True)
class VolumeMount:
    name: str
    mount_path: str
    sub_path: str = ""
    sub_path_expr: str = ""
    read_only: bool = False
    propagation: str = "None"
    recursive_read_only: str = "Disabled"  # one of RECURSIVE_READ_ONLY


def parse_volumes(spec: dict[str, Any], path: str = "spec.volumes") -> tuple[Volume, ...]:
    volumes = []
    seen: set[str] = set()
    for i, item in enumerate(f.items(spec.get("volumes"), path)):
        volume = _volume(f.mapping(item, f"{path}[{i}]"), f"{path}[{i}]")
        if volume.name in seen:
            raise InvalidField(f"{path}[{i}].name: duplicate value {volume.name!r}")
        seen.add(volume.name)
        volumes.append(volume)
    return tuple(volumes)


def _volume(entry: dict[str, Any], path: str) -> Volume:
    name = f.string(entry.get("name"), f"{path}.name", required=True)
    if len(name) > 63 or not _DNS_LABEL.match(name):
        raise InvalidField(
            f"{path}.name: invalid value {name!r}: must be a DNS label (lower case "
            "alphanumerics or '-', at most 63 characters)"
        )
    kinds = [k for k, v in entry.items() if k != "name" and v is not None]
    if not kinds:
        raise InvalidField(f"{path}: required value: must specify a volume type")
    if len(kinds) > 1:
        raise InvalidField(f"{path}.{kinds[1]}: forbidden: may not specify more than 1 volume type")
    kind = kinds[0]
    where = f"{path}.{kind}"
    source = f.mapping(entry[kind], where)
    if kind == "emptyDir":
        return _empty_dir(name, source, where)
    if kind == "hostPath":
        return _host_path(name, source, where)
    if kind == "downwardAPI":
        items = _downward_items(source.get("items"), f"{where}.items")
        return Volume(
            name,
            kind,
            default_mode=_default_mode(source, where),
            projections=(Projection("downwardAPI", items),),
        )
    if kind in ("configMap", "secret"):
        key = "name" if kind == "configMap" else "secretName"
        projection = Projection(
            kind,
            _key_items(source.get("items"), f"{where}.items"),
            f.string(source.get(key), f"{where}.{key}", required=True),
            bool(f.boolean(source.get("optional"), f"{where}.optional")),
        )
        return Volume(
            name, kind, default_mode=_default_mode(source, where), projections=(projection,)
        )
    if kind in ("persistentVolumeClaim", "ephemeral", "csi"):
        return _storage_volume(name, kind, source, where)
    if kind == "projected":
        return Volume(
            name,
            kind,
            default_mode=_default_mode(source, where),
            projections=_projections(source.get("sources"), f"{where}.sources"),
        )
    return Volume(name, kind)


def _storage_volume(name: str, kind: str, source: dict[str, Any], path: str) -> Volume:
    read_only = bool(f.boolean(source.get("readOnly"), f"{path}.readOnly"))
    if kind == "persistentVolumeClaim":
        claim = f.string(source.get("claimName"), f"{path}.claimName", required=True)
        return Volume(name, kind, claim_name=claim, read_only=read_only)
    if kind == "ephemeral":
        if source.get("volumeClaimTemplate") is None:
            raise InvalidField(f"{path}.volumeClaimTemplate: required value")
        f.mapping(source["volumeClaimTemplate"], f"{path}.volumeClaimTemplate")
        return Volume(name, kind)
    f.string(source.get("driver"), f"{path}.driver", required=True)
    attributes = f.optional_mapping(source.get("volumeAttributes"), f"{path}.volumeAttributes")
    for key, value in (attributes or {}).items():
        f.string(value, f"{path}.volumeAttributes[{key}]")
    f.optional_mapping(source.get("nodePublishSecretRef"), f"{path}.nodePublishSecretRef")
    return Volume(name, kind, read_only=read_only, csi=persistentvolumes.csi_source(source, ""))


def _empty_dir(name: str, source: dict[str, Any], path: str) -> Volume:
    medium = f.string(source.get("medium"), f"{path}.medium")
    if medium not in ("", "Memory", "HugePages") and not medium.startswith("HugePages-"):
        raise InvalidField(
            f"{path}.medium: unsupported value {medium!r}: supported values: '', 'Memory', "
            "'HugePages'"
        )
    limit = None
    if source.get("sizeLimit") is not None:
        try:
            limit = quantity.parse(source["sizeLimit"])
        except quantity.BadQuantity as exc:
            raise InvalidField(f"{path}.sizeLimit: invalid value: {exc}") from exc
        if limit < 0:
            raise InvalidField(
                f"{path}.sizeLimit: invalid value: must be greater than or equal to 0"
            )
    return Volume(name, "emptyDir", medium=medium, size_limit=limit)


def _host_path(name: str, source: dict[str, Any], path: str) -> Volume:
    host = f.string(source.get("path"), f"{path}.path", required=True)
    if ".." in host.split("/"):
        raise InvalidField(f"{path}.path: invalid value {host!r}: must not contain '..'")
    kind = f.choice(source.get("type"), f"{path}.type", HOST_PATH_TYPES)
    return Volume(name, "hostPath", path=host, path_type=kind)


def _default_mode(source: dict[str, Any], path: str) -> int:
    mode = f.file_mode(source.get("defaultMode"), f"{path}.defaultMode")
    return DEFAULT_MODE if mode is None else mode


def _item_path(value: Any, path: str) -> str:
    text = f.relative_path(value, path)
    if text.split("/")[0].startswith(".."):
        raise InvalidField(f"{path}: invalid value {text!r}: must not start with '..'")
    return text


def _downward_items(value: Any, path: str) -> tuple[FileItem, ...]:
    found = []
    for i, item in enumerate(f.items(value, path)):
        where = f"{path}[{i}]"
        entry = f.mapping(item, where)
        file_path = _item_path(entry.get("path"), f"{where}.path")
        mode = f.file_mode(entry.get("mode"), f"{where}.mode")
        has_field = entry.get("fieldRef") is not None
        has_resource = entry.get("resourceFieldRef") is not None
        if has_field and has_resource:
            raise InvalidField(
                f"{where}: invalid value: fieldRef and resourceFieldRef can not be specified "
                "simultaneously"
            )
        if not has_field and not has_resource:
            raise InvalidField(
                f"{where}: required value: one of fieldRef and resourceFieldRef is required"
            )
        if has_field:
            selected = envspec.field_path(
                entry["fieldRef"], f"{where}.fieldRef", envspec.VOLUME_FIELD_PATHS
            )
            found.append(FileItem(file_path, mode, field_path=selected))
        else:
            ref = envspec.resource_ref(entry["resourceFieldRef"], f"{where}.resourceFieldRef", True)
            found.append(FileItem(file_path, mode, resource=ref))
    return tuple(found)


def _key_items(value: Any, path: str) -> tuple[FileItem, ...]:
    found = []
    for i, item in enumerate(f.items(value, path)):
        entry = f.mapping(item, f"{path}[{i}]")
        found.append(
            FileItem(
                _item_path(entry.get("path"), f"{path}[{i}].path"),
                f.file_mode(entry.get("mode"), f"{path}[{i}].mode"),
                key=f.string(entry.get("key"), f"{path}[{i}].key", required=True),
            )
        )
    return tuple(found)


def _projections(value: Any, path: str) -> tuple[Projection, ...]:
    found = []
    paths: set[str] = set()
    for i, item in enumerate(f.items(value, path)):
        where = f"{path}[{i}]"
        entry = f.mapping(item, where)
        kinds = [k for k in _PROJECTION_KINDS if entry.get(k) is not None]
        if len(kinds) != 1:
            problem = (
                "may not specify more than 1 volume type" if kinds else "must specify a source"
            )
            raise InvalidField(f"{where}: invalid value: {problem}")
        kind = kinds[0]
        source = f.mapping(entry[kind], f"{where}.{kind}")
        if kind == "downwardAPI":
            projection = Projection(
                kind, _downward_items(source.get("items"), f"{where}.{kind}.items")
            )
        elif kind in ("configMap", "secret"):
            projection = Projection(
                kind,
                _key_items(source.get("items"), f"{where}.{kind}.items"),
                f.string(source.get("name"), f"{where}.{kind}.name", required=True),
                bool(f.boolean(source.get("optional"), f"{where}.{kind}.optional")),
            )
        elif kind == "serviceAccountToken":
            projection = _token(source, f"{where}.{kind}")
        else:
            projection = Projection(
                kind, optional=bool(f.boolean(source.get("optional"), f"{where}.{kind}.optional"))
            )
        for file in projection.items:
            if file.path in paths:
                raise InvalidField(
                    f"{where}: invalid value {file.path!r}: conflicting duplicate paths"
                )
            paths.add(file.path)
        found.append(projection)
    return tuple(found)


def _token(source: dict[str, Any], path: str) -> Projection:
    seconds = source.get("expirationSeconds")
    if seconds is not None and (
        not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < MIN_TOKEN_SECONDS
    ):
        raise InvalidField(
            f"{path}.expirationSeconds: invalid value {seconds!r}: may not specify a duration "
            "less than 10 minutes"
        )
    if seconds is not None and seconds > MAX_TOKEN_SECONDS:
        raise InvalidField(
            f"{path}.expirationSeconds: invalid value {seconds!r}: may not specify a duration "
            "larger than 2^32 seconds"
        )
    return Projection(
        "serviceAccountToken",
        (FileItem(_item_path(source.get("path"), f"{path}.path")),),
        audience=f.string(source.get("audience"), f"{path}.audience"),
        expiration_seconds=DEFAULT_TOKEN_SECONDS if seconds is None else seconds,
    )


def parse_mounts(container: dict[str, Any], path: str) -> tuple[VolumeMount, ...]:
    mounts = []
    seen: set[str] = set()
    for i, item in enumerate(f.items(container.get("volumeMounts"), f"{path}.volumeMounts")):
        where = f"{path}.volumeMounts[{i}]"
        entry = f.mapping(item, where)
        mount_path = f.string(entry.get("mountPath"), f"{where}.mountPath", required=True)
        if mount_path in seen:
            raise InvalidField(f"{where}.mountPath: invalid value {mount_path!r}: must be unique")
        seen.add(mount_path)
        sub_path = f.string(entry.get("subPath"), f"{where}.subPath")
        if sub_path:
            f.relative_path(sub_path, f"{where}.subPath")
        expr = f.string(entry.get("subPathExpr"), f"{where}.subPathExpr")
        if expr and sub_path:
            raise InvalidField(
                f"{where}.subPathExpr: invalid value {expr!r}: subPathExpr and subPath are "
                "mutually exclusive"
            )
        if expr:
            f.relative_path(expr, f"{where}.subPathExpr")
        mount = VolumeMount(
            f.string(entry.get("name"), f"{where}.name", required=True),
            mount_path,
            sub_path,
            expr,
            bool(f.boolean(entry.get("readOnly"), f"{where}.readOnly")),
            f.choice(
                entry.get("mountPropagation"), f"{where}.mountPropagation", PROPAGATIONS, "None"
            ),
            f.choice(
                entry.get("recursiveReadOnly"),
                f"{where}.recursiveReadOnly",
                RECURSIVE_READ_ONLY,
                "Disabled",
            ),
        )
        mounts.append(_check_recursive(mount, where))
    return tuple(mounts)


def _check_recursive(mount: VolumeMount, where: str) -> VolumeMount:
    """``recursiveReadOnly`` other than Disabled needs a read-only mount without propagation."""
    if mount.recursive_read_only == "Disabled":
        return mount
    if not mount.read_only:
        raise InvalidField(
            f"{where}.recursiveReadOnly: forbidden: may only be specified when readOnly is true"
        )
    if mount.propagation != "None":
        raise InvalidField(
            f"{where}.recursiveReadOnly: forbidden: may only be specified when "
            "mountPropagation is None or not specified"
        )
    return mount


def check_mounts(
    mounts: tuple[VolumeMount, ...], volumes: tuple[Volume, ...], path: str, privileged: bool
) -> None:
    """Each mount names a pod volume; Bidirectional propagation needs a privileged container."""
    names = {v.name for v in volumes}
    for i, mount in enumerate(mounts):
        where = f"{path}.volumeMounts[{i}]"
        if mount.name not in names:
            raise InvalidField(f"{where}.name: not found: {mount.name!r}")
        if mount.propagation == "Bidirectional" and not privileged:
            raise InvalidField(
                f"{where}.mountPropagation: forbidden: Bidirectional mount propagation is "
                "available only to privileged containers"
            )
