"""What the plugin watcher asks of the API server: the node's Node and its CSINode, as
JSON dicts.

``CsiNodeApi`` is the seam (``fakes.FakeCsiNodeApi`` for tests); ``KubeCsiNodeApi`` is the
real one, raw JSON requests (``pkletd.ipc.apiclient.jsonapi``). A Node change goes out as a JSON
merge patch carrying the resourceVersion it was computed from, a CSINode change as a PUT:
either way a concurrent writer makes it fail with 409, never lose a change. Every failure
is an ``ApiCallFailed`` with the HTTP status (0 when no answer came).
"""

from __future__ import annotations

from typing import Protocol

from pkletd.ipc.apiclient.jsonapi import JsonApi, Obj

MERGE_PATCH = "application/merge-patch+json"
CSINODES = "/apis/storage.k8s.io/v1/csinodes"


class CsiNodeApi(Protocol):
    def get_node(self, name: str) -> Obj: ...

    def patch_node(self, name: str, patch: Obj) -> Obj: ...

    def get_csinode(self, name: str) -> Obj: ...

    def create_csinode(self, csinode: Obj) -> Obj: ...

    def update_csinode(self, csinode: Obj) -> Obj: ...

    def close(self) -> None: ...


class KubeCsiNodeApi(JsonApi):
    def get_node(self, name: str) -> Obj:
        return self.request("GET", f"/api/v1/nodes/{name}")

    def patch_node(self, name: str, patch: Obj) -> Obj:
        return self.request("PATCH", f"/api/v1/nodes/{name}", patch, MERGE_PATCH)

    def get_csinode(self, name: str) -> Obj:
        return self.request("GET", f"{CSINODES}/{name}")

    def create_csinode(self, csinode: Obj) -> Obj:
        return self.request("POST", CSINODES, csinode)

    def update_csinode(self, csinode: Obj) -> Obj:
        return self.request("PUT", f"{CSINODES}/{csinode['metadata']['name']}", csinode)
