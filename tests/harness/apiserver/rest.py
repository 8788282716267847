"""GET, LIST, CREATE, UPDATE and PATCH over the store, in kube-apiserver's order of checks.

Create: decode (unknown fields per ``fieldValidation``) → namespace match → defaults →
mutating admission → system fields, ``PrepareForCreate`` → validation (422) → validating
admission → store (409 AlreadyExists). Update: decode → name match → load (404, or create
where the kind allows it) → uid precondition and resourceVersion (409 Conflict) → defaults
→ ``PrepareForUpdate`` → admission → validation → no-op writes are skipped (same
resourceVersion, no event). Patch applies the patch to the stored object and then takes the
update path, so a ``metadata.resourceVersion`` in a patch is a precondition. Deletion is in
``deletion.py``::

    registry = Registry(store, admission, controllers)
    obj = registry.create(call, body)
    obj = registry.patch(call, raw_bytes, "application/strategic-merge-patch+json")
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from tests.harness.apiserver import errors, schema
from tests.harness.apiserver.admission import Admission, AdmissionRequest, random_suffix
from tests.harness.apiserver.calls import Call
from tests.harness.apiserver.kinds.base import Strategy
from tests.harness.apiserver.kinds.pods import bind, validate_binding
from tests.harness.apiserver.lists import Predicate, list_objects
from tests.harness.apiserver.patch import PatchFailed, PatchMalformed, json_patch, merge_patch
from tests.harness.apiserver.resources import ResourceType
from tests.harness.apiserver.store import Store, now_rfc3339
from tests.harness.apiserver.strategic import MergeKeyMissing, strategic_merge
from tests.harness.apiserver.validation import FieldError, GoLiteral

Obj = dict[str, Any]
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
SUCCESS_CREATED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Success",
    "code": 201,
}


def wire(resource: ResourceType, obj: Obj) -> Obj:
    """The stored object as this resource's API version shows it."""
    body = resource.to_wire(copy.deepcopy(obj))
    rest = {k: v for k, v in body.items() if k not in ("kind", "apiVersion")}
    return {"kind": resource.kind, "apiVersion": resource.api_version, **rest}


def list_item(resource: ResourceType, obj: Obj) -> Obj:
    body = wire(resource, obj)
    del body["kind"], body["apiVersion"]
    return body


class Registry:
    def __init__(self, store: Store, admission: Admission, hooks: Any = None) -> None:
        self.store = store
        self.admission = admission
        self.hooks = hooks  # controllers reacting to writes (namespaces, root CA...)

    # ----------------------------------------------------------------------- decode

    def decode(
        self, call: Call, body: Any, kind: str = "", model: str = "", api_version: str = ""
    ) -> Obj:
        resource = call.resource
        kind, model = kind or resource.kind, model or resource.model
        api_version = api_version or resource.api_version
        if not isinstance(body, dict):
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type "
                f"{kind}): couldn't get version/kind; json parse error"
            )
        if body.get("kind") and body["kind"] != kind:
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {kind}): {body['kind']}"
            )
        if body.get("apiVersion") and body["apiVersion"] != api_version:
            raise errors.bad_request(
                f"the API version in the data ({body['apiVersion']}) does "
                f"not match the expected API version ({api_version})"
            )
        try:
            obj, unknown = schema.decode(body, model)
        except schema.DecodeError as exc:
            version = api_version.rsplit("/", 1)[-1]
            raise errors.bad_request(
                f'{kind} in version "{version}" cannot be handled as a {kind}: {exc}'
            ) from None
        self._unknown_fields(
            call,
            unknown,
            f'{kind} in version "{api_version.rsplit("/", 1)[-1]}" cannot be handled as a {kind}: ',
        )
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        obj.setdefault("metadata", {})
        return obj

    def _unknown_fields(self, call: Call, unknown: list[str], prefix: str) -> None:
        if not unknown:
            return
        texts = [f'unknown field "{path}"' for path in unknown]
        directive = call.query.field_validation()
        if directive == "Strict":
            raise errors.bad_request(prefix + "strict decoding error: " + ", ".join(texts))
        if directive == "Warn":
            call.warnings.extend(texts)

    # ----------------------------------------------------------------------- reads

    def get(self, call: Call) -> Obj:
        found = self.store.get(call.resource.bucket, call.namespace, call.name)
        if found is None:
            raise errors.not_found(call.group, call.plural, call.name)
        return wire(call.resource, found)

    def list_of(self, call: Call) -> Obj:
        items, meta = list_objects(self.store, call, Predicate(call))
        return {
            "kind": call.resource.list_kind,
            "apiVersion": call.resource.api_version,
            "metadata": meta,
            "items": [list_item(call.resource, o) for o in items],
        }

    # ----------------------------------------------------------------------- create

    def create(self, call: Call, body: Any) -> Obj:
        obj = call.resource.from_wire(self.decode(call, body))
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        meta = obj["metadata"]
        self._check_create_namespace(call, meta)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        strategy = call.resource.strategy
        strategy.default(obj)
        request = AdmissionRequest(
            "CREATE", call.group, call.plural, "", call.namespace, "", call.user, obj
        )
        self.admission.admit(request)
        self._before_create(strategy, obj)
        self._invalid_if(strategy, meta.get("name", ""), strategy.validate(obj))
        self.admission.validate(request)
        if call.query.dry_run():
            return wire(call.resource, obj)
        stored = self._store_new(call, obj)
        if self.hooks is not None:
            self.hooks.created(call.resource, stored)
        return wire(call.resource, stored)

    def _check_create_namespace(self, call: Call, meta: Obj) -> None:
        if not call.resource.namespaced:
            meta.pop("namespace", None)
            return
        if meta.get("namespace") and meta["namespace"] != call.namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the "
                "namespace sent on the request"
            )
        meta["namespace"] = call.namespace

    def _before_create(self, strategy: Strategy, obj: Obj) -> None:
        meta = obj["metadata"]
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        strategy.prepare_create(obj)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if meta.get("generateName") and not meta.get("name"):
            meta["name"] = meta["generateName"][:58] + random_suffix()

    def _store_new(self, call: Call, obj: Obj) -> Obj:
        meta = obj["metadata"]
        for _ in range(8):
            try:
                return self.store.create(call.resource.bucket, obj)
            except errors.ApiError as exc:
                if exc.code != 409 or not meta.get("generateName"):
                    raise errors.already_exists(call.group, call.plural, meta["name"]) from None
                meta["name"] = meta["generateName"][:58] + random_suffix()
        raise errors.already_exists(call.group, call.plural, meta["name"])

    def _invalid_if(self, strategy: Strategy, name: str, problems: list[Any]) -> None:
        if problems:
            raise errors.invalid(strategy.group, strategy.kind, name, problems)

    # ----------------------------------------------------------------------- update

    def update(self, call: Call, body: Any, strategy: Strategy | None = None) -> tuple[int, Obj]:
        """PUT: (200, object) or (201, object) when the kind allows create-on-update."""
        new = call.resource.from_wire(self.decode(call, body))
        new.pop("kind", None)
        new.pop("apiVersion", None)
        self._check_name(call, new["metadata"])
        strategy = strategy or call.resource.strategy
        with self.store.lock:
            old = self.store.get(call.resource.bucket, call.namespace, call.name)
            if old is None:
                if strategy.allow_create_on_update and not call.subresource:
                    new["metadata"].pop("resourceVersion", None)
                    return 201, self.create(call, wire(call.resource, new))
                raise errors.not_found(call.group, call.plural, call.name)
            return 200, self.apply_update(call, new, old, strategy)

    def _check_name(self, call: Call, meta: Obj) -> None:
        if meta.get("name", "") != call.name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name', '')}) does not "
                f"match the name on the URL ({call.name})"
            )
        if call.resource.namespaced:
            if meta.get("namespace") and meta["namespace"] != call.namespace:
                raise errors.bad_request(
                    f"the namespace of the object ({meta['namespace']}) "
                    f"does not match the namespace on the URL "
                    f"({call.namespace})"
                )
            meta["namespace"] = call.namespace

    def apply_update(
        self, call: Call, new: Obj, old: Obj, strategy: Strategy, uid_precondition: bool = True
    ) -> Obj:
        """The update of ``old`` to ``new`` (already decoded), under the store lock. A PUT's
        ``metadata.uid`` is a precondition (409); a patched uid fails validation (422)."""
        meta, old_meta = new["metadata"], old["metadata"]
        self._check_preconditions(call, meta, old_meta, strategy, uid_precondition)
        strategy.default(new)
        for key in ("uid", "creationTimestamp", "generation"):
            if key in old_meta and (key != "uid" or not meta.get("uid")):
                meta[key] = old_meta[key]
            elif key == "generation":
                meta.pop(key, None)
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            if key in old_meta:
                meta[key] = old_meta[key]
            elif key == "deletionTimestamp":
                meta.pop(key, None)
        strategy.prepare_update(new, old)
        request = AdmissionRequest(
            "UPDATE",
            call.group,
            call.plural,
            call.subresource,
            call.namespace,
            call.name,
            call.user,
            new,
            old,
        )
        self.admission.admit(request)
        self._invalid_if(strategy, call.name, strategy.validate_update(new, old))
        self.admission.validate(request)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if new == old or call.query.dry_run():
            return wire(call.resource, new)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and old_meta.get("deletionGracePeriodSeconds") == 0
        ):
            gone = self.store.delete(call.resource.bucket, call.namespace, call.name)
            if self.hooks is not None:
                self.hooks.deleted(call.resource, gone)
            return wire(call.resource, gone)
        stored = self.store.update(call.resource.bucket, new)
        if self.hooks is not None:
            self.hooks.updated(call.resource, stored)
        return wire(call.resource, stored)

    def _check_preconditions(
        self, call: Call, meta: Obj, old_meta: Obj, strategy: Strategy, uid_precondition: bool
    ) -> None:
        if uid_precondition and meta.get("uid") and meta["uid"] != old_meta["uid"]:
            key = call.resource.storage_key(call.namespace, call.name)
            raise errors.precondition_failed(
                call.group, call.plural, call.name, key, "UID", meta["uid"], old_meta["uid"]
            )
        version = meta.get("resourceVersion", "")
        if not version:
            if not strategy.allow_unconditional_update:
                raise errors.invalid(
                    call.group,
                    call.plural,
                    call.name,
                    [
                        FieldError.invalid(
                            "metadata.resourceVersion",
                            GoLiteral("0x0"),
                            "must be specified for an update",
                        )
                    ],
                )
            return
        if version != old_meta["resourceVersion"]:
            raise errors.conflict(call.group, call.plural, call.name, errors.OPTIMISTIC_LOCK)

    # ----------------------------------------------------------------------- patch

    def patch(
        self, call: Call, raw: bytes, content_type: str, strategy: Strategy | None = None
    ) -> Obj:
        patch_type = content_type.split(";", 1)[0].strip()
        if patch_type not in PATCH_TYPES[:3]:
            raise errors.unsupported_media_type(patch_type, PATCH_TYPES)
        try:
            document = json.loads(raw or b"null")
        except json.JSONDecodeError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from None
        strategy = strategy or call.resource.strategy
        with self.store.lock:
            old = self.store.get(call.resource.bucket, call.namespace, call.name)
            if old is None:
                raise errors.not_found(call.group, call.plural, call.name)
            patched = self._apply_patch(call, wire(call.resource, old), document, patch_type)
            new = call.resource.from_wire(self.decode(call, patched))
            new.pop("kind", None)
            new.pop("apiVersion", None)
            self._check_name(call, new["metadata"])
            return self.apply_update(call, new, old, strategy, uid_precondition=False)

    def _apply_patch(self, call: Call, current: Obj, document: Any, patch_type: str) -> Any:
        try:
            if patch_type == "application/json-patch+json":
                return json_patch(current, document)
            if patch_type == "application/merge-patch+json":
                return merge_patch(current, document)
            return strategic_merge(current, document, call.resource.model)
        except PatchMalformed as exc:
            raise errors.bad_request(str(exc)) from None
        except PatchFailed:
            raise errors.unprocessable() from None
        except MergeKeyMissing as exc:
            raise errors.unknown(500, str(exc)) from None

    # ----------------------------------------------------------------------- pods/binding

    def bind(self, call: Call, body: Any) -> Obj:
        binding = self.decode(call, body, "Binding", "V1Binding")
        name = binding["metadata"].get("name") or call.name
        if name != call.name:
            raise errors.bad_request("name in URL does not match name in Binding object")
        problems = validate_binding(binding)
        if problems:
            raise errors.invalid("", "Binding", name, problems)
        with self.store.lock:
            pod = self.store.get("pods", call.namespace, call.name)
            if pod is None:
                raise errors.not_found("", "pods", call.name)
            wanted = binding["metadata"]
            key = call.resource.storage_key(call.namespace, call.name)
            if wanted.get("uid") and wanted["uid"] != pod["metadata"]["uid"]:
                raise errors.precondition_failed(
                    "", "pods", call.name, key, "UID", wanted["uid"], pod["metadata"]["uid"]
                )
            bind(pod, binding)
            if not call.query.dry_run():
                stored = self.store.update("pods", pod)
                if self.hooks is not None:
                    self.hooks.updated(call.resource, stored)
        return dict(SUCCESS_CREATED)
