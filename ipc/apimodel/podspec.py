"""The Pod wire format (Kubernetes API JSON), parsed into typed, frozen objects.

``parse_pod`` checks every field pkletd acts on and raises ``InvalidPod`` with the
field path (``spec.containers[1].image: required value``), as the API server's
validation would. Fields pkletd does not act on yet are carried in ``raw`` and
ignored. Pods travel over the bus as their ``raw`` dicts, and the receiver
parses them again: a bus peer is not trusted either. ``refused_pod`` keeps what can
be read of a pod that failed (its identity and the reason), so admission can refuse
it where its status shows why.
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NewType, TypeVar

from pkletd.ipc.apimodel import (
    dnsspec,
    envspec,
    ephemeralspec,
    namespacespec,
    priority,
    readiness,
    resourcespec,
    runtimeclass,
    securityspec,
    volumespec,
)
from pkletd.ipc.apimodel.dnsspec import PodDns
from pkletd.ipc.apimodel.envspec import EnvFrom, EnvVar
from pkletd.ipc.apimodel.fieldcheck import InvalidField
from pkletd.ipc.apimodel.namespacespec import Namespaces
from pkletd.ipc.apimodel.podenums import TERMINAL_PHASES, PullPolicy, RestartPolicy
from pkletd.ipc.apimodel.probespec import InvalidProbe, Probe, ProbeType, parse_hooks, parse_probes
from pkletd.ipc.apimodel.resourcespec import Resources
from pkletd.ipc.apimodel.securityspec import ContainerSecurity, PodSecurity
from pkletd.ipc.apimodel.volumespec import Volume, VolumeMount

_T = TypeVar("_T")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"  # the API's default
_E = TypeVar("_E", bound=enum.StrEnum)
DEFAULT_GRACE_S = 30

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


PodUID = NewType("PodUID", str)


class InvalidPod(ValueError):
    """A pod manifest that cannot be run; the message starts with the field path."""


@dataclass(frozen=True, slots=True)
class Port:
    container_port: int
    host_port: int
    protocol: str
    name: str = ""
    host_ip: str = ""  # the address a hostPort binds ("": every address)


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    working_dir: str
    env: tuple[EnvVar, ...]
    ports: tuple[Port, ...]
    image_pull_policy: PullPolicy
    hash: str
    probes: tuple[Probe, ...] = ()
    restart_policy: RestartPolicy | None = None  # Always on an init container: a sidecar
    post_start: Probe | None = None
    pre_stop: Probe | None = None
    env_from: tuple[EnvFrom, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()
    security: ContainerSecurity | None = None
    resources: Resources = resourcespec.NONE
    stdin: bool = False  # the container's stdin stays open (for attach)
    stdin_once: bool = False  # ... until the first attach closes it
    tty: bool = False
    target_container_name: str = ""  # an ephemeral container's: whose namespaces it joins
    termination_message_path: str = DEFAULT_TERMINATION_MESSAGE_PATH  # "": none
    termination_message_policy: str = "File"  # or FallbackToLogsOnError

    @property
    def sidecar(self) -> bool:
        return self.restart_policy is RestartPolicy.ALWAYS

    def probe(self, kind: ProbeType) -> Probe | None:
        return next((p for p in self.probes if p.type == kind), None)

    def port_number(self, port: int | str) -> int | None:
        """A probe's port: a number as is, a name through the container's ports."""
        if isinstance(port, int):
            return port
        return next((p.container_port for p in self.ports if p.name == port), None)


@dataclass(frozen=True, slots=True)
class Pod:
    uid: PodUID
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    containers: tuple[Container, ...]
    restart_policy: RestartPolicy
    host_network: bool
    grace_period_s: int
    raw: dict[str, Any]
    init_containers: tuple[Container, ...] = ()
    active_deadline_s: int | None = None
    volumes: tuple[Volume, ...] = ()
    security: PodSecurity | None = None
    deleted: bool = False  # the API server set its deletionTimestamp: stop it
    image_pull_secrets: tuple[str, ...] = ()  # the Secrets' names, in the spec's order
    priority: int = 0  # ``priority.pod_priority``
    ephemeral_containers: tuple[Container, ...] = ()  # added to the running pod by the API
    readiness_gates: tuple[str, ...] = ()  # condition types that must be True for Ready
    runtime_class: str = ""  # ``runtimeClassName``; "" for the runtime's default handler
    overhead: resourcespec.Amounts = ()  # ``spec.overhead``, as RuntimeClass admission set it
    namespaces: Namespaces = namespacespec.DEFAULT  # hostPID, hostIPC, ... (``namespacespec``)
    invalid: str = ""  # why it cannot be run (``refused_pod``): no container was read
    dns: PodDns = PodDns()  # dnsPolicy, dnsConfig, hostname, subdomain, hostAliases

    @property
    def full_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def finished(self) -> bool:
        """Its source says it ended (an API pod in phase Succeeded or Failed): a kubelet
        that restarts does not run it again."""
        status = self.raw.get("status")
        return isinstance(status, dict) and status.get("phase") in TERMINAL_PHASES

    @property
    def sidecars(self) -> tuple[Container, ...]:
        return tuple(c for c in self.init_containers if c.sidecar)


def parse_pod(raw: Any) -> Pod:
    obj = _mapping(raw, "")
    if obj.get("apiVersion", "v1") != "v1":
        raise InvalidPod(f"apiVersion: must be v1, got {obj.get('apiVersion')!r}")
    if obj.get("kind", "Pod") != "Pod":
        raise InvalidPod(f"kind: must be Pod, got {obj.get('kind')!r}")
    meta = _mapping(obj.get("metadata"), "metadata")
    spec = _mapping(obj.get("spec"), "spec")
    name = _name(meta.get("name"), "metadata.name", _DNS_SUBDOMAIN, 253)
    namespace = _name(meta.get("namespace", "default"), "metadata.namespace", _DNS_LABEL, 63)
    containers = _containers(spec.get("containers"))
    init_containers = _init_containers(spec.get("initContainers") or [], containers)
    ephemeral = _ephemeral_containers(
        spec.get("ephemeralContainers") or [], init_containers + containers
    )
    annotations = _string_map(meta.get("annotations", {}), "metadata.annotations")
    _field(securityspec.check_apparmor_annotations, annotations)
    return Pod(
        uid=PodUID(_string(meta.get("uid", ""), "metadata.uid")),
        name=name,
        namespace=namespace,
        labels=_string_map(meta.get("labels", {}), "metadata.labels"),
        annotations=annotations,
        containers=containers,
        restart_policy=_member(
            spec.get("restartPolicy", RestartPolicy.ALWAYS), "spec.restartPolicy", RestartPolicy
        ),
        host_network=_bool(spec.get("hostNetwork", False), "spec.hostNetwork"),
        grace_period_s=_grace_period(meta, spec),
        raw=obj,
        init_containers=init_containers,
        active_deadline_s=_deadline(spec.get("activeDeadlineSeconds")),
        deleted=meta.get("deletionTimestamp") is not None,
        image_pull_secrets=_pull_secrets(spec.get("imagePullSecrets") or []),
        priority=_field(priority.pod_priority, spec),
        ephemeral_containers=ephemeral,
        readiness_gates=_field(readiness.parse_gates, spec),
        runtime_class=_field(runtimeclass.parse_name, spec),
        overhead=_field(runtimeclass.parse_overhead, spec),
        namespaces=_field(namespacespec.parse_namespaces, spec),
        dns=_field(dnsspec.parse_pod_dns, spec),
        **_volumes_and_security(spec, init_containers + containers + ephemeral),
    )


def refused_pod(raw: Any, error: InvalidPod) -> Pod | None:
    """A pod ``parse_pod`` refused, as far as its identity goes: no containers, the
    reason in ``invalid``; None if even its metadata cannot be read."""
    try:
        meta = _mapping(_mapping(raw, "").get("metadata"), "metadata")
        uid = _string(meta.get("uid", ""), "metadata.uid")
        name = _name(meta.get("name"), "metadata.name", _DNS_SUBDOMAIN, 253)
        namespace = _name(meta.get("namespace", "default"), "metadata.namespace", _DNS_LABEL, 63)
    except InvalidPod:
        return None
    if not uid:
        return None
    return Pod(
        uid=PodUID(uid),
        name=name,
        namespace=namespace,
        labels={},
        annotations={},
        containers=(),
        restart_policy=RestartPolicy.NEVER,
        host_network=False,
        grace_period_s=0,
        raw=raw,
        deleted=meta.get("deletionTimestamp") is not None,
        invalid=str(error),
    )


def _pull_secrets(value: Any) -> tuple[str, ...]:
    """``imagePullSecrets`` names, in order; the API allows an entry without a name, which
    the kubelet skips, and so is it here."""
    path = "spec.imagePullSecrets"
    entries = [_mapping(e, f"{path}[{i}]") for i, e in enumerate(_list(value, path))]
    names = (_string(e.get("name", ""), f"{path}[{i}].name") for i, e in enumerate(entries))
    return tuple(name for name in names if name)


def _grace_period(meta: dict[str, Any], spec: dict[str, Any]) -> int:
    """The grace period to stop the pod with: a deleted pod's deletionGracePeriodSeconds
    (what the kubelet uses), else its terminationGracePeriodSeconds."""
    deletion = meta.get("deletionGracePeriodSeconds")
    if deletion is not None:
        return _grace(deletion, "metadata.deletionGracePeriodSeconds")
    return _grace(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S))


def _volumes_and_security(
    spec: dict[str, Any], containers: tuple[Container, ...]
) -> dict[str, Any]:
    """``volumes`` and the pod's ``securityContext``; every volume mount names a volume."""
    volumes = _field(volumespec.parse_volumes, spec)
    security = _field(securityspec.parse_pod_security, spec)
    for c, path in zip(containers, _paths(spec), strict=True):
        privileged = c.security is not None and bool(c.security.privileged)
        _field(volumespec.check_mounts, c.volume_mounts, volumes, path, privileged)
    return {"volumes": volumes, "security": security}


def _paths(spec: dict[str, Any]) -> list[str]:
    """The field paths of init, regular and ephemeral containers, in that order."""
    lists = ("initContainers", "containers", "ephemeralContainers")
    return [f"spec.{key}[{i}]" for key in lists for i in range(len(spec.get(key) or []))]


def _field(parse: Callable[..., _T], *args: Any) -> _T:
    """Run one of the ipc spec parsers, its InvalidField as InvalidPod."""
    try:
        return parse(*args)
    except InvalidField as exc:
        raise InvalidPod(str(exc)) from exc


def _containers(value: Any) -> tuple[Container, ...]:
    if value is None or value == []:
        raise InvalidPod("spec.containers: required value (a pod needs at least one container)")
    if not isinstance(value, list):
        raise InvalidPod(f"spec.containers: must be a list, got {type(value).__name__}")
    containers = tuple(_container(c, f"spec.containers[{i}]") for i, c in enumerate(value))
    seen: set[str] = set()
    for i, c in enumerate(containers):
        if c.name in seen:
            raise InvalidPod(f"spec.containers[{i}].name: duplicate value {c.name!r}")
        seen.add(c.name)
    return containers


def _init_containers(value: Any, regular: tuple[Container, ...]) -> tuple[Container, ...]:
    path = "spec.initContainers"
    items = _list(value, path)
    found = tuple(_container(c, f"{path}[{i}]", init=True) for i, c in enumerate(items))
    seen = {c.name for c in regular}
    for i, c in enumerate(found):
        if c.name in seen:
            raise InvalidPod(f"{path}[{i}].name: duplicate value {c.name!r}")
        seen.add(c.name)
        if not c.sidecar and (c.probes or c.post_start or c.pre_stop):
            field = "lifecycle" if c.post_start or c.pre_stop else f"{c.probes[0].type}Probe"
            raise InvalidPod(f"{path}[{i}].{field}: may not be set for init containers")
    return found


def _ephemeral_containers(value: Any, others: tuple[Container, ...]) -> tuple[Container, ...]:
    """``spec.ephemeralContainers``: containers without the fields the API forbids them,
    each with its ``targetContainerName``; names unique across every kind of container."""
    path = "spec.ephemeralContainers"
    found = []
    for i, item in enumerate(_list(value, path)):
        where = f"{path}[{i}]"
        raw = _mapping(item, where)
        _field(ephemeralspec.check_fields, raw, where)
        target = _field(ephemeralspec.target_name, raw, where)
        found.append(dataclasses.replace(_container(raw, where), target_container_name=target))
    seen = {c.name for c in others}
    for i, c in enumerate(found):
        if c.name in seen:
            raise InvalidPod(f"{path}[{i}].name: duplicate value {c.name!r}")
        seen.add(c.name)
    return tuple(found)


def _deadline(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidPod(f"spec.activeDeadlineSeconds: must be a positive integer, got {value!r}")
    return value


def _container(value: Any, path: str, init: bool = False) -> Container:
    c = _mapping(value, path)
    image = _string(c.get("image", ""), f"{path}.image")
    if not image.strip():
        raise InvalidPod(f"{path}.image: required value")
    post_start, pre_stop = _hooks(c, path)
    return Container(
        name=_name(c.get("name"), f"{path}.name", _DNS_LABEL, 63),
        image=image,
        command=_strings(c.get("command", []), f"{path}.command"),
        args=_strings(c.get("args", []), f"{path}.args"),
        working_dir=_string(c.get("workingDir", ""), f"{path}.workingDir"),
        env=_field(envspec.parse_env, c, path),
        env_from=_field(envspec.parse_env_from, c, path),
        volume_mounts=_field(volumespec.parse_mounts, c, path),
        security=_field(securityspec.parse_container_security, c, path),
        resources=_field(resourcespec.parse_resources, c, path),
        ports=_ports(c.get("ports", []), f"{path}.ports"),
        image_pull_policy=_member(
            c.get("imagePullPolicy", default_pull_policy(image)),
            f"{path}.imagePullPolicy",
            PullPolicy,
        ),
        hash=container_hash(c),
        probes=_probes(c, path),
        restart_policy=_container_restart_policy(c.get("restartPolicy"), path, init),
        stdin=_bool(c.get("stdin", False), f"{path}.stdin"),
        stdin_once=_bool(c.get("stdinOnce", False), f"{path}.stdinOnce"),
        tty=_bool(c.get("tty", False), f"{path}.tty"),
        post_start=post_start,
        pre_stop=pre_stop,
        termination_message_path=_string(
            c.get("terminationMessagePath", DEFAULT_TERMINATION_MESSAGE_PATH),
            f"{path}.terminationMessagePath",
        ),
        termination_message_policy=_choice(
            c.get("terminationMessagePolicy", "File"),
            f"{path}.terminationMessagePolicy",
            TERMINATION_MESSAGE_POLICIES,
        ),
    )


def _container_restart_policy(value: Any, path: str, init: bool) -> RestartPolicy | None:
    if value is None:
        return None
    if not init or value != RestartPolicy.ALWAYS:
        where = "init containers" if init else "regular containers"
        raise InvalidPod(f"{path}.restartPolicy: unsupported value {value!r} for {where}")
    return RestartPolicy.ALWAYS


def _hooks(container: dict[str, Any], path: str) -> tuple[Probe | None, Probe | None]:
    """The postStart and preStop hooks."""
    try:
        hooks = parse_hooks(container, path)
    except InvalidProbe as exc:
        raise InvalidPod(str(exc)) from exc
    return hooks.get(ProbeType.POST_START), hooks.get(ProbeType.PRE_STOP)


def _probes(container: dict[str, Any], path: str) -> tuple[Probe, ...]:
    try:
        return parse_probes(container, path)
    except InvalidProbe as exc:
        raise InvalidPod(str(exc)) from exc


def container_hash(container: dict[str, Any]) -> str:
    """A stable hash of a container's spec: a change means the container must restart."""
    canonical = json.dumps(container, sort_keys=True, separators=(",", ":"))
    return format(zlib.crc32(canonical.encode()), "08x")


def default_pull_policy(image: str) -> PullPolicy:
    """Always for ``:latest`` or an untagged image, else IfNotPresent (the API's default)."""
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return PullPolicy.IF_NOT_PRESENT
    if ":" not in last or last.endswith(":latest"):
        return PullPolicy.ALWAYS
    return PullPolicy.IF_NOT_PRESENT


def _ports(value: Any, path: str) -> tuple[Port, ...]:
    ports = []
    for i, item in enumerate(_list(value, path)):
        entry = _mapping(item, f"{path}[{i}]")
        ports.append(
            Port(
                container_port=_port_number(
                    entry.get("containerPort"), f"{path}[{i}].containerPort"
                ),
                host_port=_port_number(
                    entry.get("hostPort", 0), f"{path}[{i}].hostPort", zero_ok=True
                ),
                protocol=_choice(
                    entry.get("protocol", "TCP"), f"{path}[{i}].protocol", ("TCP", "UDP", "SCTP")
                ),
                name=_string(entry.get("name", ""), f"{path}[{i}].name"),
                host_ip=_host_ip(entry.get("hostIP", ""), f"{path}[{i}].hostIP"),
            )
        )
    return tuple(ports)


def _host_ip(value: Any, path: str) -> str:
    text = _string(value, path)
    try:
        if text:
            ipaddress.ip_address(text)
    except ValueError:
        raise InvalidPod(f"{path}: invalid value {text!r}: must be a valid IP address") from None
    return text


def _grace(value: Any, path: str = "spec.terminationGracePeriodSeconds") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidPod(f"{path}: must be a non-negative integer, got {value!r}")
    return value


def _port_number(value: Any, path: str, zero_ok: bool = False) -> int:
    low = 0 if zero_ok else 1
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 65535:
        raise InvalidPod(f"{path}: must be an integer in {low}..65535, got {value!r}")
    return value


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        where = path or "pod"
        raise InvalidPod(f"{where}: must be a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidPod(f"{path}: must be a list, got {type(value).__name__}")
    return value


def _string(value: Any, path: str) -> str:
    if value is None:
        raise InvalidPod(f"{path}: required value")
    if not isinstance(value, str):
        raise InvalidPod(f"{path}: must be a string, got {type(value).__name__}")
    return value


def _strings(value: Any, path: str) -> tuple[str, ...]:
    return tuple(_string(v, f"{path}[{i}]") for i, v in enumerate(_list(value, path)))


def _string_map(value: Any, path: str) -> dict[str, str]:
    return {k: _string(v, f"{path}.{k}") for k, v in _mapping(value, path).items()}


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidPod(f"{path}: must be true or false, got {value!r}")
    return value


def _choice(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidPod(
            f"{path}: unsupported value {value!r}: supported values: {', '.join(allowed)}"
        )
    return str(value)


def _member(value: Any, path: str, members: type[_E]) -> _E:
    """One of a closed set's values, as its enum member."""
    return members(_choice(value, path, tuple(members)))


def _name(value: Any, path: str, pattern: re.Pattern[str], limit: int) -> str:
    name = _string(value, path)
    if not name:
        raise InvalidPod(f"{path}: required value")
    if len(name) > limit or not pattern.match(name):
        raise InvalidPod(
            f"{path}: invalid value {name!r}: must be lower case alphanumerics or '-'"
            f"{' or .' if limit > 63 else ''}, at most {limit} characters"
        )
    return name
