"""The plainer core/v1 kinds: namespaces, configmaps, secrets, services, serviceaccounts,
endpoints, each with the defaults and validation of the real registry that a client sees.

Namespaces are DNS labels, get ``spec.finalizers: [kubernetes]``, phase Active and the
``kubernetes.io/metadata.name`` label. ConfigMaps and Secrets: keys are config keys
(``[-._a-zA-Z0-9]+``, at most 253, not ``.``/``..``/``..x``); all values together at most
1 MiB (``[]: Too long`` for a ConfigMap, ``data: Too long`` for a Secret); a ConfigMap key in
both ``data`` and ``binaryData`` is refused; once ``immutable: true``, ``immutable``,
``data`` and ``binaryData`` may not change (``Forbidden: field is immutable when `immutable`
is set``). Secrets default to ``Opaque``, get ``stringData`` merged over ``data`` (and
dropped) as the v1 conversion does, keep their ``type``, and are checked per type: the
docker types need their key holding a JSON object (the value shows as ``<secret contents
redacted>``), tls its two keys, basic-auth and ssh-auth theirs (with the real server's odd
``data[%s][...]`` paths). Services are DNS-1035 names, get a cluster IP from 10.96.0.0/12
and the ClusterIP defaults.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import re
from collections.abc import Callable

from tests.harness.apiserver.kinds.base import Obj, StatusStrategy, Strategy
from tests.harness.apiserver.kinds.gojson import json_object_problem
from tests.harness.apiserver.validation import (
    FieldError,
    dns1035_label,
    dns1123_label,
    immutable,
    validate_meta_update,
)

NAMESPACE_LABEL = "kubernetes.io/metadata.name"
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
MAX_DATA_BYTES = 1024 * 1024  # core.MaxSecretSize, for ConfigMaps too
_DOCKER_KEYS = {
    "kubernetes.io/dockercfg": ".dockercfg",
    "kubernetes.io/dockerconfigjson": ".dockerconfigjson",
}
REDACTED = "<secret contents redacted>"
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")


class NamespaceStrategy(Strategy):
    kind = "Namespace"
    model = "V1Namespace"
    namespaced = False
    has_status = True
    return_deleted_object = True
    name_check = staticmethod(dns1123_label)

    def default(self, obj: Obj) -> None:
        obj["metadata"].setdefault("labels", {})[NAMESPACE_LABEL] = obj["metadata"].get("name", "")

    def prepare_create(self, obj: Obj) -> None:
        obj["status"] = {"phase": "Active"}
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        new["spec"] = copy.deepcopy(old.get("spec") or {})


class NamespaceStatusStrategy(StatusStrategy):
    pass


class ConfigMapStrategy(Strategy):
    kind = "ConfigMap"
    model = "V1ConfigMap"

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_config_map(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old)
        errs += _immutable_data(new, old, ("data", "binaryData"))
        return errs + _validate_config_map(new)


class SecretStrategy(Strategy):
    kind = "Secret"
    model = "V1Secret"
    field_labels = ("type",)

    def default(self, obj: Obj) -> None:
        """The v1 conversion: ``stringData`` is written over ``data`` and dropped."""
        if not obj.get("type"):
            obj["type"] = "Opaque"
        strings = obj.pop("stringData", None) or {}
        if strings:
            data = obj.setdefault("data", {}) or {}
            for key, value in strings.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            obj["data"] = data

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_secret(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old)
        if new.get("type") != old.get("type"):
            errs.append(immutable("type", new.get("type", "")))
        errs += _immutable_data(new, old, ("data",))
        return errs + _validate_secret(new)

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        return {"type": obj.get("type", "")}


def config_key_problems(key: str) -> list[str]:
    """``IsConfigMapKey``: what is wrong with a ConfigMap or Secret key."""
    problems = []
    if len(key) > 253:
        problems.append("must be no more than 253 characters")
    if not _CONFIG_KEY.fullmatch(key):
        problems.append(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
            "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
            "'[-._a-zA-Z0-9]+')"
        )
    if key in (".", ".."):
        problems.append(f"must not be '{key}'")
    elif key.startswith(".."):
        problems.append("must not start with '..'")
    return problems


def _key_errors(field: str, key: str) -> list[FieldError]:
    return [FieldError.invalid(f"{field}[{key}]", key, p) for p in config_key_problems(key)]


def _decoded_size(value: str | None) -> int:
    """The length of a base64 value's bytes (schema decoding has checked the encoding)."""
    try:
        return len(base64.b64decode(value or ""))
    except ValueError:
        return len(value or "")


def _validate_config_map(obj: Obj) -> list[FieldError]:
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    errs: list[FieldError] = []
    total = 0
    for key, value in data.items():
        errs += _key_errors("data", key)
        if key in binary:
            errs.append(
                FieldError.invalid(f"data[{key}]", key, "duplicate of key present in binaryData")
            )
        total += len((value or "").encode())
    for key, value in binary.items():
        errs += _key_errors("binaryData", key)
        total += _decoded_size(value)
    if total > MAX_DATA_BYTES:
        errs.append(FieldError.too_long("[]", MAX_DATA_BYTES))  # the whole object's path
    return errs


def _validate_secret(obj: Obj) -> list[FieldError]:
    data = obj.get("data") or {}
    errs: list[FieldError] = []
    total = 0
    for key, value in data.items():
        errs += _key_errors("data", key)
        total += _decoded_size(value)
    if total > MAX_DATA_BYTES:
        errs.append(FieldError.too_long("data", MAX_DATA_BYTES))
    kind = obj.get("type", "")
    if kind == "kubernetes.io/service-account-token":
        annotation = "kubernetes.io/service-account.name"
        if not (obj["metadata"].get("annotations") or {}).get(annotation):
            errs.append(FieldError.required(f"metadata.annotations[{annotation}]"))
    elif kind in _DOCKER_KEYS:
        key = _DOCKER_KEYS[kind]
        if key not in data:
            errs.append(FieldError.required(f"data[{key}]"))
        else:
            problem = json_object_problem(base64.b64decode(data[key] or ""))
            if problem:
                errs.append(FieldError.invalid(f"data[{key}]", REDACTED, problem))
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            # the real path is built as NewPath("data[%s]").Key(...): kept as it reads
            errs.append(FieldError.required("data[%s][username]"))
            errs.append(FieldError.required("data[%s][password]"))
    elif kind == "kubernetes.io/ssh-auth":
        if not _decoded_size(data.get("ssh-privatekey")):
            errs.append(FieldError.required("data[%s][ssh-privatekey]"))
    elif kind == "kubernetes.io/tls":
        errs += [FieldError.required(f"data[{k}]") for k in ("tls.crt", "tls.key") if k not in data]
    return errs


def _immutable_data(new: Obj, old: Obj, fields: tuple[str, ...]) -> list[FieldError]:
    if not old.get("immutable"):
        return []
    errs = []
    if not new.get("immutable"):
        errs.append(FieldError.forbidden("immutable", "field is immutable when `immutable` is set"))
    for field in fields:
        if (new.get(field) or {}) != (old.get(field) or {}):
            errs.append(FieldError.forbidden(field, "field is immutable when `immutable` is set"))
    return errs


class ServiceStrategy(Strategy):
    kind = "Service"
    model = "V1Service"
    has_status = True
    return_deleted_object = True
    name_check = staticmethod(dns1035_label)

    def __init__(self, used_ips: Callable[[], set[str]]) -> None:
        self.used_ips = used_ips

    def default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))

    def prepare_create(self, obj: Obj) -> None:
        super().prepare_create(obj)
        obj["status"] = {"loadBalancer": {}}
        spec = obj["spec"]
        if spec["type"] == "ExternalName":
            return
        if not spec.get("clusterIP"):
            spec["clusterIP"] = self._allocate()
        if spec["clusterIP"] != "None":
            spec["clusterIPs"] = [spec["clusterIP"]]
            spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
        for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if key in old_spec and not spec.get(key):
                spec[key] = copy.deepcopy(old_spec[key])

    def _allocate(self) -> str:
        used = self.used_ips()
        for host in SERVICE_CIDR.hosts():
            if str(host) not in used:
                return str(host)
        raise RuntimeError("service CIDR exhausted")

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_service_spec(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old) + _validate_service_spec(new.get("spec") or {})
        old_ips = (old.get("spec") or {}).get("clusterIPs")
        new_ips = (new.get("spec") or {}).get("clusterIPs")
        if old_ips and new_ips != old_ips:
            errs.append(
                FieldError.invalid("spec.clusterIPs[0]", new_ips, "may not change once set")
            )
        return errs


def _validate_service_spec(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    ports = spec.get("ports") or []
    headless = spec.get("clusterIP") == "None"
    if not ports and spec.get("type") != "ExternalName" and not headless:
        errs.append(FieldError.required("spec.ports"))
    for i, port in enumerate(ports):
        number = port.get("port", 0)
        if not 1 <= number <= 65535:
            errs.append(
                FieldError.invalid(
                    f"spec.ports[{i}].port", number, "must be between 1 and 65535, inclusive"
                )
            )
        if len(ports) > 1 and not port.get("name"):
            errs.append(FieldError.required(f"spec.ports[{i}].name"))
    types = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
    if spec.get("type") not in types:
        errs.append(FieldError.not_supported("spec.type", spec.get("type", ""), types))
    return errs


class ServiceStatusStrategy(StatusStrategy):
    pass


class ServiceAccountStrategy(Strategy):
    kind = "ServiceAccount"
    model = "V1ServiceAccount"


class EndpointsStrategy(Strategy):
    kind = "Endpoints"
    model = "V1Endpoints"
    allow_create_on_update = True

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_subsets(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_meta_update(new, old) + _validate_subsets(new)


def _validate_subsets(obj: Obj) -> list[FieldError]:
    errs = []
    for i, subset in enumerate(obj.get("subsets") or []):
        for j, address in enumerate(subset.get("addresses") or []):
            try:
                ipaddress.ip_address(address.get("ip", ""))
            except ValueError:
                errs.append(
                    FieldError.invalid(
                        f"subsets[{i}].addresses[{j}].ip",
                        address.get("ip", ""),
                        "must be a valid IP address",
                    )
                )
    return errs
