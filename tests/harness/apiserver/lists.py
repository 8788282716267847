"""LIST: selectors, resourceVersion semantics and ``limit``/``continue`` paging.

As kube-apiserver 1.32 serves lists: no resourceVersion is a consistent read of the latest
state; ``resourceVersion=0`` may be served from cache and ignores ``limit``; a version with
``resourceVersionMatch=NotOlderThan`` (or none) waits for the store to reach it (504 after
3 s); ``Exact`` rebuilds the list at that revision (410 if compacted away). ``continue``
tokens are etcd's (base64 JSON with ``rv`` and ``start``) and pin the first page's revision.
Unsupported field selector keys are a 400 ``field label not supported: <key>``.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from typing import Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.calls import Call
from tests.harness.apiserver.selectors import FieldSelector, LabelSelector, SelectorError
from tests.harness.apiserver.store import Snapshot, Store, TooOld
from tests.harness.apiserver.validation import FieldError

Obj = dict[str, Any]
TOO_LARGE_WAIT = 3.0
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


class Predicate:
    """Label and field selection for one resource (also used by watches)."""

    def __init__(self, call: Call) -> None:
        resource = call.resource
        try:
            self.labels = LabelSelector.parse(call.query.get("labelSelector"))
            fields = FieldSelector.parse(call.query.get("fieldSelector"))
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from None
        unsupported = fields.unsupported(resource.field_labels())
        if unsupported:
            raise errors.bad_request(f"field label not supported: {unsupported[0]}")
        self.fields = fields.renamed(resource.field_label_renames)
        self.strategy = resource.strategy
        self.namespaced = resource.namespaced

    @property
    def empty(self) -> bool:
        return self.labels.empty and self.fields.empty

    def matches(self, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        if not self.labels.matches(meta.get("labels")):
            return False
        if self.fields.empty:
            return True
        fields = {"metadata.name": meta.get("name", "")}
        if self.namespaced:
            fields["metadata.namespace"] = meta.get("namespace", "")
        fields.update(self.strategy.selectable_fields(obj))
        return self.fields.matches(fields)


def validate_list_options(call: Call) -> None:
    query = call.query
    problems = []
    if query.get("resourceVersionMatch") and not query.get("resourceVersion"):
        problems.append(
            FieldError.forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            )
        )
    match = query.get("resourceVersionMatch")
    if match and match not in ("Exact", "NotOlderThan"):
        problems.append(
            FieldError.not_supported("resourceVersionMatch", match, ("Exact", "NotOlderThan"))
        )
    if match == "Exact" and query.get("resourceVersion") == "0":
        problems.append(
            FieldError.forbidden(
                "resourceVersionMatch",
                'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
            )
        )
    if problems:
        raise errors.invalid("meta.k8s.io", "ListOptions", "", problems)


def parse_resource_version(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {text}") from None
    if value < 0:
        raise errors.bad_request(f"invalid resource version: {text}")
    return value


def wait_for_revision(store: Store, wanted: int) -> None:
    deadline = time.monotonic() + TOO_LARGE_WAIT
    while store.revision < wanted:
        if time.monotonic() >= deadline:
            raise errors.too_large_resource_version(wanted, store.revision)
        time.sleep(0.02)


def list_objects(store: Store, call: Call, predicate: Predicate) -> tuple[list[Obj], Obj]:
    """The selected objects (storage form) and the list ``metadata``."""
    validate_list_options(call)
    query = call.query
    rv_text, match = query.get("resourceVersion"), query.get("resourceVersionMatch")
    token = query.get("continue")
    limit = query.integer("limit") or 0
    start = ""
    if token:
        if rv_text not in ("", "0"):
            raise errors.bad_request(
                "specifying resource version is not allowed when using continue"
            )
        revision, start = _decode_continue(token)
        snapshot = _snapshot(store, call, revision, CONTINUE_EXPIRED)
    elif rv_text in ("", "0"):
        limit = 0 if rv_text == "0" else limit
        snapshot = store.snapshot(call.resource.bucket)
    else:
        wanted = parse_resource_version(rv_text)
        if match == "Exact":
            if wanted > store.revision:
                wait_for_revision(store, wanted)
            snapshot = _snapshot(
                store, call, wanted, "The resourceVersion for the provided list is too old."
            )
        else:
            wait_for_revision(store, wanted)
            snapshot = store.snapshot(call.resource.bucket)
    return _page(snapshot, call, predicate, start, limit)


def _snapshot(store: Store, call: Call, revision: int, expired_message: str) -> Snapshot:
    try:
        return store.snapshot(call.resource.bucket, revision)
    except TooOld:
        raise errors.expired(expired_message) from None


def _page(
    snapshot: Snapshot, call: Call, predicate: Predicate, start: str, limit: int
) -> tuple[list[Obj], Obj]:
    prefix = f"{call.namespace}/" if call.namespace else ""
    candidates = [(k, o) for k, o in snapshot.items if k.startswith(prefix) and k >= start]
    selected = [(k, o) for k, o in candidates if predicate.matches(o)]
    meta: Obj = {"resourceVersion": str(snapshot.revision)}
    if limit and len(selected) > limit:
        last_key = selected[limit - 1][0]
        meta["continue"] = _encode_continue(snapshot.revision, last_key + "\x00")
        if predicate.empty:
            meta["remainingItemCount"] = len(selected) - limit
        selected = selected[:limit]
    return [o for _, o in selected], meta


def _encode_continue(revision: int, start: str) -> str:
    body = json.dumps(
        {"v": "meta.k8s.io/v1", "rv": revision, "start": start}, separators=(",", ":")
    )
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError(
                "continue key is not valid: incorrect encoded start "
                "resourceVersion (version meta.k8s.io/v1)"
            )
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error, json.JSONDecodeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from None
