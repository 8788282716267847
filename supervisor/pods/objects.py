"""The API objects the node's pods reference, as the pod-objects worker last read them:
ConfigMaps, Secrets, service account tokens, each namespace's Services, the cluster's
RuntimeClasses (each one's handler), and the storage objects a pod's volumes lead to
(claims, volumes, CSIDrivers, VolumeAttachments: ``persistentvolumes``).

The worker fetches and watches; the parent only keeps its latest word, in memory (a
Secret's bytes reach disk only in the pod's tmpfs volume). Pod-worker threads read
while the loop thread writes; every entry is replaced whole, so a reader sees one
reading or the next, never half of one.

An object not heard of yet is *pending*: the pod waits for it, as the kubelet waits on
its synchronous GET. One the API does not have is *missing* (an ``optional``
reference is then satisfied). Either way ``ObjectUnavailable`` carries the kubelet's
message.

A standalone node (no API server, so no pod-objects worker) has no objects: every
ConfigMap and Secret is missing, a token cannot be had (the kubelet's standalone
message) and there are no Services, so nothing waits for them. Nor is there a
RuntimeClass: admission refuses a pod that names one there.

``runtime_handler`` resolves a pod's ``runtimeClassName`` as the kubelet's RuntimeClass
manager does: "" for none, else the class's handler; a class the API does not have is
*missing*, with the kubelet's NotFound (``runtimeclass.node.k8s.io "x" not found``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pkletd.ipc.apimodel import persistentvolumes, runtimeclass
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind, PodReferences, TokenKey
from pkletd.ipc.bus.messages import (
    ObjectFetched,
    RuntimeClassesListed,
    ServicesListed,
    TokenIssued,
)

TokenId = tuple[str, str, str, int]  # pod uid, service account, audience, lifetime


class ObjectUnavailable(Exception):
    """An object a pod needs cannot be used; ``str()`` is the kubelet's message."""

    def __init__(self, message: str, *, missing: bool = False, pending: bool = False) -> None:
        super().__init__(message)
        self.missing = missing
        self.pending = pending


def not_found(kind: ObjectKind, name: str) -> ObjectUnavailable:
    return ObjectUnavailable(f'{kind.noun} "{name}" not found', missing=True)


STANDALONE_TOKEN = (
    "failed to fetch token: cannot use TokenManager when kubelet is in standalone mode"
)


class ApiObjects:
    def __init__(self, standalone: bool = False, node: str = "") -> None:
        self.standalone = standalone
        self.node = node  # a VolumeAttachment's name has it
        self._objects: dict[ObjectKey, ObjectFetched] = {}
        self._tokens: dict[TokenId, TokenIssued] = {}
        self._services: dict[str, list[dict[str, Any]]] = {}
        self._handlers: dict[str, str] | None = None  # RuntimeClass -> handler, once listed

    # --- what the worker says ----------------------------------------------------------

    def on_fetched(self, message: ObjectFetched) -> bool:
        """Keep the reading; whether it differs from the one before."""
        key = ObjectKey(message.object_kind, message.namespace, message.name)
        before = self._objects.get(key)
        self._objects[key] = message
        return before != message

    def on_token(self, message: TokenIssued) -> bool:
        issued = issued_id(message)
        before = self._tokens.get(issued)
        self._tokens[issued] = message
        return before is None or before.token != message.token or before.error != message.error

    def on_services(self, message: ServicesListed) -> bool:
        before = self._services.get(message.namespace)
        self._services[message.namespace] = message.services
        return before != message.services

    def on_runtime_classes(self, message: RuntimeClassesListed) -> set[str]:
        """Keep the classes; the names whose handler changed (came, went or differs)."""
        before = self._handlers
        self._handlers = dict(message.handlers)
        if before is None:
            return set(self._handlers)
        names = before.keys() | self._handlers.keys()
        return {n for n in names if before.get(n) != self._handlers.get(n)}

    def reached(self, roots: Iterable[ObjectKey]) -> set[ObjectKey]:
        """``roots`` and the storage objects their readings lead to (a claim's volume, its
        CSIDriver, its VolumeAttachment): what a pod referencing ``roots`` waits for."""
        return persistentvolumes.closure(roots, self._body, self.node)

    def keep_only(self, wanted: Iterable[PodReferences], namespaces: set[str]) -> None:
        """Forget what no pod references any more (the worker stops watching it too)."""
        objects: set[ObjectKey] = set()
        tokens: set[TokenId] = set()
        for refs in wanted:
            objects |= refs.objects
            tokens |= {token_id(t) for t in refs.tokens}
        objects = self.reached(objects)
        self._objects = {k: v for k, v in self._objects.items() if k in objects}
        self._tokens = {k: v for k, v in self._tokens.items() if k in tokens}
        self._services = {k: v for k, v in self._services.items() if k in namespaces}

    def _body(self, key: ObjectKey) -> dict[str, Any] | None:
        found = self._objects.get(key)
        return None if found is None else found.known_body

    # --- what pods read ----------------------------------------------------------------

    def get(self, key: ObjectKey) -> ObjectFetched:
        """The object as read; ObjectUnavailable if pending, missing or unreadable."""
        if self.standalone:
            raise not_found(key.kind, key.name)
        found = self._objects.get(key)
        if found is None:
            raise ObjectUnavailable(
                f'{key.kind.noun} "{key.name}" not yet read from the API server', pending=True
            )
        if found.missing:
            raise not_found(key.kind, key.name)
        if found.error:
            raise ObjectUnavailable(found.error)
        return found

    def token(self, key: TokenKey) -> str:
        if self.standalone:
            raise ObjectUnavailable(STANDALONE_TOKEN)
        found = self._tokens.get(token_id(key))
        if found is None:
            raise ObjectUnavailable("service account token not yet issued", pending=True)
        if found.error:
            raise ObjectUnavailable(f"failed to fetch token: {found.error}")
        return found.token

    def runtime_handler(self, class_name: str) -> str:
        """The handler of the pod's RuntimeClass ("" for none); ObjectUnavailable if the
        classes were not listed yet, or the API has no such class."""
        if not class_name:
            return ""
        if self._handlers is None:
            raise ObjectUnavailable(
                f'RuntimeClass "{class_name}" not yet read from the API server', pending=True
            )
        handler = self._handlers.get(class_name)
        if handler is None:
            raise ObjectUnavailable(runtimeclass.not_found(class_name), missing=True)
        return handler

    def services(self, namespace: str) -> list[dict[str, Any]]:
        if self.standalone:
            return []
        found = self._services.get(namespace)
        if found is None:
            raise ObjectUnavailable(
                "services have not yet been read at least once, cannot construct envvars",
                pending=True,
            )
        return found


def token_id(key: TokenKey) -> TokenId:
    return key.pod_uid, key.service_account, key.audience, key.expiration_seconds


def issued_id(message: TokenIssued) -> TokenId:
    return message.pod_uid, message.service_account, message.audience, message.expiration_seconds
