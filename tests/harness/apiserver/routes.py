"""Routing: which code answers a request, by path, verb and subresource.

Non-resource paths (``/version``, ``/healthz``, discovery, ``/metrics``) are answered here;
resource requests go to the registry (``rest.py``/``deletion.py``), the review endpoints, the
kubelet proxy, or the watch loop. Output follows the Accept header (JSON, YAML, Table,
PartialObjectMetadata).
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tests.harness.apiserver import discovery, errors, openapi, tables
from tests.harness.apiserver.admission import AdmissionRequest
from tests.harness.apiserver.calls import Call
from tests.harness.apiserver.encoding import Output, decode_body, negotiate
from tests.harness.apiserver.lists import Predicate, parse_resource_version
from tests.harness.apiserver.requestinfo import RequestInfo
from tests.harness.apiserver.rest import SUCCESS_CREATED, wire
from tests.harness.apiserver.selectors import FieldSelector, FieldTerm
from tests.harness.apiserver.store import TooOld
from tests.harness.apiserver.validation import FieldError
from tests.harness.apiserver.watch import WatchLoop, WatchOptions

if TYPE_CHECKING:
    from tests.harness.apiserver.auth import UserInfo
    from tests.harness.apiserver.handler import ApiHandler
    from tests.harness.apiserver.kinds.base import Strategy
    from tests.harness.apiserver.server import ServerParts

Obj = dict[str, Any]
HEALTH = ("/healthz", "/livez", "/readyz")
UPGRADES = ("exec", "attach", "portforward")
EVICTED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


class Router:
    def __init__(self, parts: ServerParts) -> None:
        self.parts = parts

    def route(self, h: ApiHandler, info: RequestInfo, user: UserInfo) -> None:
        if not info.resource_request:
            self._non_resource(h, info)
            return
        resource = self.parts.table.find(info.group, info.version, info.resource)
        if resource is None or (info.name and resource.namespaced and not info.namespace):
            raise errors.path_not_found()
        namespace = info.namespace if resource.namespaced else ""
        call = Call(resource, namespace, info.name, user, h.query, info.subresource)
        if info.subresource:
            self._subresource(h, info, call)
        else:
            self._main(h, info, call)

    # ----------------------------------------------------------------------- non-resource

    def _non_resource(self, h: ApiHandler, info: RequestInfo) -> None:
        path, table = info.path.rstrip("/") or "/", self.parts.table
        if h.command != "GET":
            raise errors.method_not_allowed()
        if path in HEALTH or any(path.startswith(p + "/") for p in HEALTH):
            h.send_text(200, "ok")
            return
        if path == "/metrics":
            h.send_text(
                200,
                self.parts.request_log.exposition().decode(),
                "text/plain; version=0.0.4; charset=utf-8",
            )
            return
        documents = {
            "/version": lambda: discovery.version_info(self.parts.version),
            "/api": lambda: discovery.api_versions(self.parts.address()),
            "/apis": lambda: discovery.group_list(table),
        }
        if path in documents:
            h.send_object(200, documents[path]())
            return
        if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            body = openapi.lookup(table, path, self.parts.version)
        else:
            body = self._discovery_document(path)
        if body is None:
            raise errors.path_not_found()
        h.send_object(200, body)

    def _discovery_document(self, path: str) -> Obj | None:
        parts = path.strip("/").split("/")
        table = self.parts.table
        if parts[0] == "api" and len(parts) == 2:
            return discovery.resource_list(table, "", parts[1])
        if parts[0] == "apis" and len(parts) == 2:
            return discovery.api_group(table, parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return discovery.resource_list(table, parts[1], parts[2])
        return None

    # ----------------------------------------------------------------------- main resource

    def _main(self, h: ApiHandler, info: RequestInfo, call: Call) -> None:
        resource, registry = call.resource, self.parts.registry
        if info.verb not in resource.verbs or (
            info.verb == "create" and resource.namespaced and not call.namespace
        ):
            raise errors.method_not_allowed()
        output = negotiate(h.headers.get("Accept"))
        if info.verb == "get":
            self._send_read(h, call, [registry.get(call)], output, single=True)
        elif info.verb == "list":
            listed = registry.list_of(call)
            self._send_read(h, call, listed, output)
        elif info.verb == "watch":
            self._watch(h, call, output)
        elif info.verb == "create":
            h.send_object(201, self._create(h, call), output.media, warnings=call.warnings)
        elif info.verb == "update":
            code, obj = registry.update(call, self._body(h))
            h.send_object(code, obj, output.media, warnings=call.warnings)
        elif info.verb == "patch":
            obj = registry.patch(call, h.read_body(), h.headers.get("Content-Type", ""))
            h.send_object(200, obj, output.media, warnings=call.warnings)
        elif info.verb == "delete":
            options = self.parts.deleter.options(call, self._body(h, optional=True))
            code, obj = self.parts.deleter.delete(call, options)
            h.send_object(code, obj, output.media)
        elif info.verb == "deletecollection":
            options = self.parts.deleter.options(call, self._body(h, optional=True))
            h.send_object(200, self.parts.deleter.delete_collection(call, options), output.media)
        else:
            raise errors.method_not_allowed()

    def _create(self, h: ApiHandler, call: Call) -> Obj:
        body = self._body(h)
        reviews = self.parts.reviews
        if call.plural == "tokenreviews":
            return reviews.token_review(self.parts.registry.decode(call, body))
        if call.plural == "subjectaccessreviews":
            return reviews.subject_access_review(self.parts.registry.decode(call, body))
        return self.parts.registry.create(call, body)

    def _body(self, h: ApiHandler, optional: bool = False) -> Any:
        data = h.read_body()
        if optional and not data.strip():
            return None
        return decode_body(data, h.headers.get("Content-Type", ""))

    def _send_read(
        self, h: ApiHandler, call: Call, result: Any, output: Output, single: bool = False
    ) -> None:
        resource = call.resource
        if output.view == "Table":
            items = (
                result
                if single
                else [
                    {"kind": resource.kind, "apiVersion": resource.api_version, **i}
                    for i in result["items"]
                ]
            )
            meta = (
                {"resourceVersion": items[0]["metadata"].get("resourceVersion", "")}
                if single
                else result["metadata"]
            )
            include = call.query.get("includeObject", "Metadata") or "Metadata"
            body = tables.to_table(resource, items, meta, include, output.view_version)
            h.send_object(
                200,
                body,
                content_type=f"application/json;as=Table;v={output.view_version};g=meta.k8s.io",
            )
            return
        if output.view:
            body = _metadata_view(result, single, output.view_version)
            h.send_object(200, body)
            return
        h.send_object(200, result[0] if single else result, output.media)

    # ----------------------------------------------------------------------- watch

    def _watch(self, h: ApiHandler, call: Call, output: Output) -> None:
        predicate = Predicate(call)
        if call.name:
            predicate.fields = FieldSelector(
                (*predicate.fields.terms, FieldTerm("metadata.name", call.name, False))
            )
        query, store = call.query, self.parts.store
        send_initial = query.flag("sendInitialEvents")
        _validate_watch(call, send_initial)
        rv_text = query.get("resourceVersion")
        since = None if rv_text in ("", "0") or send_initial else parse_resource_version(rv_text)
        timeout = query.integer("timeoutSeconds")
        if not timeout:  # unset or 0: the server picks one
            floor = self.parts.min_request_timeout
            timeout = int(floor * (1 + random.random()))
        try:
            watcher = store.watch(call.resource.bucket, since, call.namespace)
        except TooOld as exc:
            h.start_stream(200, [("Content-Type", "application/json")])
            h.write_event({"type": "ERROR", "object": errors.expired(str(exc)).status()})
            h.end_stream()
            return
        watcher.connection = h.connection
        options = WatchOptions(
            call.resource.kind,
            call.resource.api_version,
            time.monotonic() + timeout,
            allow_bookmarks=query.flag("allowWatchBookmarks"),
            bookmark_interval=self.parts.bookmark_interval(),
            send_initial_events=send_initial,
        )
        content_type = (
            "application/json"
            if not output.view
            else (f"application/json;as={output.view};v={output.view_version};g=meta.k8s.io")
        )
        h.start_stream(200, [("Content-Type", content_type)])
        loop = WatchLoop(
            watcher,
            options,
            predicate.matches,
            lambda kind, obj: self._render(call, output, obj),
            h.write_event,
            store.request_bookmark,
            h.peer_gone,
        )
        try:
            loop.run()
        finally:
            store.unwatch(watcher)
        h.end_stream()

    def _render(self, call: Call, output: Output, obj: Obj) -> Obj:
        body = wire(call.resource, obj)
        if output.view == "Table":
            include = call.query.get("includeObject", "Metadata") or "Metadata"
            return tables.to_table(
                call.resource,
                [body],
                {"resourceVersion": body["metadata"].get("resourceVersion", "")},
                include,
                output.view_version,
            )
        if output.view:
            return _metadata_view([body], True, output.view_version)
        return body

    # ----------------------------------------------------------------------- subresources

    def _subresource(self, h: ApiHandler, info: RequestInfo, call: Call) -> None:
        resource = call.resource
        sub = resource.subresource(info.subresource)
        if sub is None:
            raise errors.path_not_found()
        name = info.subresource
        if name == "status":
            self._object(h, call, resource.status_strategy)
        elif name in resource.object_subresources:
            self._object(h, call, resource.object_subresources[name])
        elif name in UPGRADES:
            self._upgrade(h, info, call)
        elif name == "log" and h.command == "GET":
            self.parts.proxy.logs(call.namespace, call.name, h.query.values, h)
        elif name == "proxy":
            rest = "/".join(info.rest) + ("/" if info.path.endswith("/") and info.rest else "")
            self.parts.proxy.node_proxy(
                call.name,
                h.command,
                rest,
                urlsplit(h.path).query,
                dict(h.headers.items()),
                h.read_body(),
                h,
            )
        elif name == "binding" and h.command == "POST":
            self.parts.registry.bind(call, self._body(h))
            h.send_object(201, SUCCESS_CREATED)
        elif name == "eviction" and h.command == "POST":
            self._evict(h, call)
        elif name == "token" and h.command == "POST":
            self._token(h, call)
        else:
            raise errors.method_not_allowed()

    def _object(self, h: ApiHandler, call: Call, strategy: Strategy | None) -> None:
        """A subresource that is the object itself (``status``, ``ephemeralcontainers``):
        GET it, PUT or PATCH it through the subresource's strategy."""
        registry = self.parts.registry
        output = negotiate(h.headers.get("Accept"))
        if h.command == "GET":
            h.send_object(200, registry.get(call), output.media)
        elif h.command == "PUT":
            _, obj = registry.update(call, self._body(h), strategy)
            h.send_object(200, obj, output.media, warnings=call.warnings)
        elif h.command == "PATCH":
            obj = registry.patch(call, h.read_body(), h.headers.get("Content-Type", ""), strategy)
            h.send_object(200, obj, output.media, warnings=call.warnings)
        else:
            raise errors.method_not_allowed()

    def _upgrade(self, h: ApiHandler, info: RequestInfo, call: Call) -> None:
        if h.command not in ("GET", "POST"):
            raise errors.method_not_allowed()
        if "upgrade" not in h.headers.get("Connection", "").lower():
            self.parts.proxy.pod(call.namespace, call.name)
            raise errors.bad_request("Upgrade request required")
        headers = [(k, v) for k, v in h.headers.items()]
        self.parts.proxy.upgrade(
            info.subresource, call.namespace, call.name, h.query.values, h.command, headers, h
        )

    def _evict(self, h: ApiHandler, call: Call) -> None:
        eviction = self.parts.registry.decode(
            call, self._body(h), "Eviction", "V1Eviction", "policy/v1"
        )
        options = eviction.get("deleteOptions") or {}
        pod_call = Call(call.resource, call.namespace, call.name, call.user, call.query, "eviction")
        self.parts.deleter.delete(pod_call, options)
        h.send_object(201, EVICTED)

    def _token(self, h: ApiHandler, call: Call) -> None:
        request = self.parts.registry.decode(
            call,
            self._body(h),
            "TokenRequest",
            "AuthenticationV1TokenRequest",
            "authentication.k8s.io/v1",
        )

        def admit(checked: Obj) -> None:
            self.parts.admission.admit(
                AdmissionRequest(
                    "CREATE",
                    "",
                    "serviceaccounts",
                    "token",
                    call.namespace,
                    call.name,
                    call.user,
                    checked,
                )
            )

        answer = self.parts.reviews.token_request(
            call.namespace, call.name, request, admit, call.warnings
        )
        h.send_object(201, answer, warnings=call.warnings)


def _validate_watch(call: Call, send_initial: bool) -> None:
    query = call.query
    if not send_initial:
        return
    problems = []
    if query.get("resourceVersionMatch") != "NotOlderThan":
        problems.append(
            FieldError.forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )
        )
    if not query.flag("allowWatchBookmarks"):
        problems.append(
            FieldError.forbidden(
                "allowWatchBookmarks",
                "sendInitialEvents requires setting allowWatchBookmarks to true",
            )
        )
    if problems:
        raise errors.invalid("meta.k8s.io", "ListOptions", "", problems)


def _metadata_view(result: Any, single: bool, version: str) -> Obj:
    api_version = f"meta.k8s.io/{version}"

    def partial(obj: Obj) -> Obj:
        return {
            "kind": "PartialObjectMetadata",
            "apiVersion": api_version,
            "metadata": obj.get("metadata", {}),
        }

    if single:
        return partial(result[0])
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": api_version,
        "metadata": result["metadata"],
        "items": [partial(i) for i in result["items"]],
    }
