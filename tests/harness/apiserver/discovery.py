"""Discovery documents: ``/version``, ``/api``, ``/apis``, ``/apis/<g>``, ``/api/v1``,
``/apis/<g>/<v>``, in the legacy (unaggregated) format.

kubectl 1.32 asks for aggregated discovery first (``as=APIGroupDiscoveryList``) and falls back
to these when the answer is plain ``application/json``, as against an older server. The
version reported is ``ApiServerConfig.version`` (v1.32.x by default, which also makes the
gcloud kubectl dispatcher pick kubectl 1.32)::

    version_info("v1.32.4"); api_versions("127.0.0.1:6443"); resource_list(table, "", "v1")
"""

from __future__ import annotations

from typing import Any

from tests.harness.apiserver.resources import ResourceTable

Obj = dict[str, Any]


def version_info(version: str) -> Obj:
    major, minor = version.lstrip("v").split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-22T16:00:00Z",
        "goVersion": "go1.23.8",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> Obj:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def group_list(table: ResourceTable) -> Obj:
    groups: dict[str, list[str]] = {}
    for group, version in table.group_versions():
        if group:
            groups.setdefault(group, []).append(version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(g, v) for g, v in groups.items()],
    }


def api_group(table: ResourceTable, name: str) -> Obj | None:
    versions = [v for g, v in table.group_versions() if g == name]
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def resource_list(table: ResourceTable, group: str, version: str) -> Obj | None:
    rows = table.in_group_version(group, version)
    if not rows:
        return None
    resources: list[Obj] = []
    for row in rows:
        entry: Obj = {
            "name": row.plural,
            "singularName": row.singular,
            "namespaced": row.namespaced,
            "kind": row.kind,
            "verbs": list(row.verbs),
        }
        if row.short_names:
            entry["shortNames"] = list(row.short_names)
        if row.categories:
            entry["categories"] = list(row.categories)
        resources.append(entry)
        for sub in row.subresources:
            item: Obj = {
                "name": f"{row.plural}/{sub.name}",
                "singularName": "",
                "namespaced": row.namespaced,
            }
            if sub.group:
                item.update(group=sub.group, version=sub.version)
            item.update(kind=sub.kind, verbs=list(sub.verbs))
            resources.append(item)
    group_version = f"{group}/{version}" if group else version
    body: Obj = {"kind": "APIResourceList"}
    if group:
        body["apiVersion"] = "v1"
    body.update(groupVersion=group_version, resources=resources)
    return body
