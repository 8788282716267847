"""``RequestInfoFactory``: what a URL and method address (verb, group, resource, name...).

The same rules as k8s.io/apiserver: ``/api/v1/...`` and ``/apis/<g>/<v>/...``; a
``namespaces/<ns>/`` prefix scopes a resource unless what follows is the namespace's own
``status`` or ``finalize``; the verb comes from the method, a name, and ``watch``; the legacy
``/watch/`` path segment also makes a watch. Everything after the subresource is ``rest``
(the path a ``nodes/<n>/proxy/...`` request carries). A list or watch whose field selector
requires ``metadata.name=<x>`` is about ``x`` for the authorizer (``selected_name``), and
list, watch and deletecollection carry their raw ``fieldSelector`` to it::

    info = parse("GET", "/api/v1/namespaces/default/pods", query)   # verb "list"
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.harness.apiserver.calls import Query
from tests.harness.apiserver.selectors import FieldSelector, SelectorError
from tests.harness.apiserver.validation import path_segment_name

_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_VERBS_WITH_SELECTORS = ("list", "watch", "deletecollection")


@dataclass
class RequestInfo:
    path: str
    method: str
    resource_request: bool = False
    verb: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    rest: list[str] = field(default_factory=list)
    selected_name: str = ""  # a list/watch's ``metadata.name`` field selector value
    field_selector: str = ""

    @property
    def is_watch(self) -> bool:
        return self.verb == "watch"

    @property
    def authorized_name(self) -> str:
        """The name the authorizer sees (``RequestInfo.Name`` of the real server)."""
        return self.name or self.selected_name


def parse(method: str, path: str, query: Query) -> RequestInfo:
    info = RequestInfo(path=path, method=method)
    parts = [p for p in path.strip("/").split("/") if p] if path.strip("/") else []
    info.verb = method.lower()
    if len(parts) < 2 or parts[0] not in ("api", "apis"):
        return info
    if parts[0] == "api":
        info.version, parts = parts[1], parts[2:]
    else:
        if len(parts) < 3:
            return info
        info.group, info.version, parts = parts[1], parts[2], parts[3:]
    if not parts:
        return info
    info.resource_request = True
    legacy_watch = parts[0] == "watch"
    if legacy_watch:
        parts = parts[1:]
    if parts and parts[0] == "namespaces" and len(parts) > 1:
        info.namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    info.resource = parts[0] if parts else ""
    info.name = parts[1] if len(parts) > 1 else ""
    info.subresource = parts[2] if len(parts) > 2 else ""
    info.rest = parts[3:]
    info.verb = _verb(method, info, query, legacy_watch)
    if info.verb in _VERBS_WITH_SELECTORS:
        info.field_selector = query.get("fieldSelector")
    if info.verb in ("list", "watch"):
        info.selected_name = _selected_name(info.field_selector)
    return info


def _selected_name(raw: str) -> str:
    try:
        name = FieldSelector.parse(raw).value_of("metadata.name")
    except SelectorError:
        return ""
    return name if name and not path_segment_name(name) else ""


def _verb(method: str, info: RequestInfo, query: Query, legacy_watch: bool) -> str:
    if method in _METHOD_VERBS:
        return _METHOD_VERBS[method]
    if method == "DELETE":
        return "delete" if info.name else "deletecollection"
    if method in ("GET", "HEAD"):
        watching = legacy_watch or query.get("watch").lower() not in ("", "false", "0")
        if watching and not info.subresource:
            return "watch"
        return "get" if info.name else "list"
    return method.lower()
