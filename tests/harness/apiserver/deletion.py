"""DELETE and DELETECOLLECTION: preconditions, graceful deletion, finalizers, namespaces.

The generic store's rules: ``preconditions.uid``/``resourceVersion`` must match (409); a kind
with graceful deletion (pods) gets ``deletionTimestamp = now + grace`` and
``deletionGracePeriodSeconds`` (MODIFIED) and stays until a DELETE with a shorter grace ends
at 0 (MODIFIED then DELETED); a second DELETE may only shorten the grace; finalizers keep any
object (with ``deletionTimestamp``) until an update empties them. A namespace turns
Terminating and the namespace controller (``controllers.py``) empties and removes it.
The answer is the object where the kind returns it (pods, services, namespaces, or whenever
the object still exists), else a Success Status naming it::

    deleter = Deleter(registry)
    deleter.delete(call, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests.harness.apiserver import errors, schema
from tests.harness.apiserver.admission import AdmissionRequest
from tests.harness.apiserver.calls import Call
from tests.harness.apiserver.lists import Predicate, list_objects
from tests.harness.apiserver.rest import Registry, wire
from tests.harness.apiserver.validation import FieldError

Obj = dict[str, Any]
PROPAGATION = ("Foreground", "Background", "Orphan", "nil")


def _stamp(seconds: int = 0, base: str | None = None) -> str:
    start = schema.parse_time(base) if base else dt.datetime.now(dt.UTC)
    return schema.format_time(start + dt.timedelta(seconds=seconds))


class Deleter:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.store = registry.store

    def options(self, call: Call, body: Any) -> Obj:
        """DeleteOptions from the body, else from the query; validated."""
        if body:
            options, _ = schema.decode(body, "V1DeleteOptions")
        else:
            options = {}
            grace = call.query.integer("gracePeriodSeconds")
            if grace is not None:
                options["gracePeriodSeconds"] = grace
            if call.query.get("propagationPolicy"):
                options["propagationPolicy"] = call.query.get("propagationPolicy")
            if call.query.has("orphanDependents"):
                options["orphanDependents"] = call.query.flag("orphanDependents")
        problems = []
        policy = options.get("propagationPolicy")
        if policy is not None and policy not in PROPAGATION[:3]:
            problems.append(FieldError.not_supported("propagationPolicy", policy, PROPAGATION))
        if policy is not None and "orphanDependents" in options:
            problems.append(
                FieldError.invalid(
                    "propagationPolicy",
                    policy,
                    "orphanDependents and deletionPropagation cannot be both set",
                )
            )
        if problems:
            raise errors.invalid("meta.k8s.io", "DeleteOptions", "", problems)
        return options

    # ----------------------------------------------------------------------- delete

    def delete(self, call: Call, options: Obj) -> tuple[int, Obj]:
        with self.store.lock:
            obj = self.store.get(call.resource.bucket, call.namespace, call.name)
            if obj is None:
                raise errors.not_found(call.group, call.plural, call.name)
            self.registry.admission.admit(
                AdmissionRequest(
                    "DELETE",
                    call.group,
                    call.plural,
                    call.subresource,
                    call.namespace,
                    call.name,
                    call.user,
                    None,
                    obj,
                )
            )
            self._check_preconditions(call, obj, options.get("preconditions") or {})
            if call.resource.plural == "namespaces" and call.group == "":
                result, deleted = self._delete_namespace(call, obj)
            else:
                result, deleted = self._delete_object(call, obj, options)
        code = 202 if not deleted and options.get("orphanDependents") is False else 200
        return code, result

    def _check_preconditions(self, call: Call, obj: Obj, preconditions: Obj) -> None:
        meta = obj["metadata"]
        key = call.resource.storage_key(call.namespace, call.name)
        for field, what in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = preconditions.get(field)
            if wanted is not None and wanted != meta.get(field):
                raise errors.precondition_failed(
                    call.group, call.plural, call.name, key, what, wanted, meta.get(field, "")
                )

    def _delete_object(self, call: Call, obj: Obj, options: Obj) -> tuple[Obj, bool]:
        meta = obj["metadata"]
        strategy = call.resource.strategy
        dry_run = call.query.dry_run()
        requested = options.get("gracePeriodSeconds")
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds")
            if current not in (None, 0) and (requested is None or requested >= current):
                return self._answer(call, obj, deleted=False), False  # pending, unchanged
            if current not in (None, 0):
                meta["deletionTimestamp"] = _stamp(requested - current, meta["deletionTimestamp"])
                meta["deletionGracePeriodSeconds"] = requested
        else:
            grace = strategy.grace_period(obj, requested)
            if grace is not None:
                meta["deletionTimestamp"] = _stamp(grace)
                meta["deletionGracePeriodSeconds"] = grace
                if meta.get("generation", 0) > 0:
                    meta["generation"] += 1
            elif meta.get("finalizers"):
                meta["deletionTimestamp"] = _stamp()
                meta["deletionGracePeriodSeconds"] = 0
        stored = self.store.get(call.resource.bucket, call.namespace, call.name)
        if meta != (stored or {}).get("metadata") and not dry_run:
            obj = self.store.update(call.resource.bucket, obj)
        if meta.get("finalizers") or (meta.get("deletionGracePeriodSeconds") or 0) > 0:
            return wire(call.resource, obj), False
        if dry_run:
            return self._answer(call, obj, deleted=True), True
        gone = self.store.delete(call.resource.bucket, call.namespace, call.name)
        hooks = self.registry.hooks
        if hooks is not None:
            hooks.deleted(call.resource, gone)
        return self._answer(call, gone, deleted=True), True

    def _answer(self, call: Call, obj: Obj, deleted: bool) -> Obj:
        if not deleted or call.resource.strategy.return_deleted_object:
            return wire(call.resource, obj)
        details: Obj = {"name": obj["metadata"]["name"]}
        if call.group:
            details["group"] = call.group
        details.update(kind=call.plural, uid=obj["metadata"].get("uid", ""))
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }

    def _delete_namespace(self, call: Call, namespace: Obj) -> tuple[Obj, bool]:
        meta = namespace["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = _stamp()
            meta["deletionGracePeriodSeconds"] = 0
            namespace.setdefault("status", {})["phase"] = "Terminating"
            namespace = self.store.update("namespaces", namespace)
            hooks = self.registry.hooks
            if hooks is not None:
                hooks.namespace_terminating(call.name)
            current = self.store.get("namespaces", "", call.name)
            return wire(call.resource, current or namespace), current is None
        if (namespace.get("spec") or {}).get("finalizers") or meta.get("finalizers"):
            return wire(call.resource, namespace), False
        gone = self.store.delete("namespaces", "", call.name)
        return wire(call.resource, gone), True

    # ----------------------------------------------------------------------- collection

    def delete_collection(self, call: Call, options: Obj) -> Obj:
        with self.store.lock:
            items, meta = list_objects(self.store, call, Predicate(call))
            results = []
            for item in items:
                one = Call(
                    call.resource,
                    item["metadata"].get("namespace", ""),
                    item["metadata"]["name"],
                    call.user,
                    call.query,
                )
                _, result = self.delete(one, options)
                if result.get("kind") == "Status":
                    result = wire(call.resource, item)
                results.append({k: v for k, v in result.items() if k not in ("kind", "apiVersion")})
        return {
            "kind": call.resource.list_kind,
            "apiVersion": call.resource.api_version,
            "metadata": {"resourceVersion": str(self.store.revision)},
            "items": results,
        }
