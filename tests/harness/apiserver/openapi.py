"""A minimal OpenAPI v3: ``/openapi/v3`` (the index) and one document per group/version.

kubectl 1.32 fetches ``/openapi/v3`` to learn whether the server takes the
``fieldValidation`` query parameter (it looks for it on each kind's PATCH operation, tagged
with ``x-kubernetes-group-version-kind``); without an answer it falls back to client-side
validation, which needs ``/openapi/v2``. These documents carry the paths and operations of
the served resources with their query parameters, but no component schemas: kubectl then
validates on the server and computes ``apply`` patches from its built-in types, while
``kubectl explain`` (which needs schemas) is not supported. ``/openapi/v2`` is not served.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.harness.apiserver.resources import ResourceTable, ResourceType

Obj = dict[str, Any]
WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
READ_PARAMS = (
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "watch",
    "allowWatchBookmarks",
    "sendInitialEvents",
)


def _param(name: str, location: str = "query") -> Obj:
    return {"name": name, "in": location, "schema": {"type": "string", "uniqueItems": True}}


def _operation(
    resource: ResourceType, action: str, params: tuple[str, ...], namespaced_path: bool
) -> Obj:
    parameters = [_param(p) for p in params]
    if namespaced_path:
        parameters.append({**_param("namespace", "path"), "required": True})
    return {
        "operationId": f"{action}{resource.kind}",
        "parameters": parameters,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": resource.group,
            "kind": resource.kind,
            "version": resource.version,
        },
    }


def _paths(resource: ResourceType) -> dict[str, Obj]:
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    scoped = f"{prefix}/namespaces/{{namespace}}" if resource.namespaced else prefix
    collection = f"{scoped}/{resource.plural}"
    item = f"{collection}/{{name}}"
    ns = resource.namespaced
    paths: dict[str, Obj] = {collection: {}, item: {}}
    if "create" in resource.verbs:
        paths[collection]["post"] = _operation(resource, "post", WRITE_PARAMS, ns)
    if "list" in resource.verbs:
        paths[collection]["get"] = _operation(resource, "list", READ_PARAMS, ns)
    if "get" in resource.verbs:
        paths[item]["get"] = _operation(resource, "get", (), ns)
    if "update" in resource.verbs:
        paths[item]["put"] = _operation(resource, "put", WRITE_PARAMS, ns)
    if "patch" in resource.verbs:
        paths[item]["patch"] = _operation(resource, "patch", (*WRITE_PARAMS, "force"), ns)
    if "delete" in resource.verbs:
        paths[item]["delete"] = _operation(resource, "delete", ("dryRun", "gracePeriodSeconds"), ns)
    return {k: v for k, v in paths.items() if v}


def document(table: ResourceTable, group: str, version: str, server_version: str) -> Obj | None:
    rows = table.in_group_version(group, version)
    if not rows:
        return None
    paths: dict[str, Obj] = {}
    for row in rows:
        paths.update(_paths(row))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
        "components": {"schemas": {}},
    }


def _key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def index(table: ResourceTable, server_version: str) -> Obj:
    paths = {}
    for group, version in table.group_versions():
        body = json.dumps(document(table, group, version, server_version), sort_keys=True)
        digest = hashlib.sha512(body.encode()).hexdigest().upper()
        key = _key(group, version)
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def lookup(table: ResourceTable, path: str, server_version: str) -> Obj | None:
    """The document for ``/openapi/v3[/api/v1 | /apis/<g>/<v>]``, or None."""
    parts = path.strip("/").split("/")[2:]
    if not parts:
        return index(table, server_version)
    if parts[0] == "api" and len(parts) == 2:
        return document(table, "", parts[1], server_version)
    if parts[0] == "apis" and len(parts) == 3:
        return document(table, parts[1], parts[2], server_version)
    return None
