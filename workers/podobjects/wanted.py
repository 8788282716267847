"""The pods the parent has (its snapshot, then ``PodStatusUpdated`` and
``PodForgotten``) and what they reference between them: the ConfigMaps and Secrets
(``references.py``, the list the parent reads them by), the service account tokens,
and the namespaces whose Services the environment variables need (``default``
always: the ``kubernetes`` service's variables go to every pod).

A pod stays until the parent forgets it, whatever its phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pkletd.ipc.apimodel.references import ObjectKey, PodReferences, TokenKey, references

Obj = dict[str, Any]
MASTER_NAMESPACE = "default"


class Wanted:
    def __init__(self) -> None:
        self._pods: dict[str, tuple[str, PodReferences]] = {}  # uid -> namespace, references

    def replace(self, pods: Sequence[Obj]) -> set[ObjectKey]:
        """The snapshot's pods, every other one forgotten; the objects a pod references
        that it did not before (a new pod: all of its own)."""
        present = {_uid(pod) for pod in pods}
        for uid in [uid for uid in self._pods if uid not in present]:
            self.forget(uid)
        renewed: set[ObjectKey] = set()
        for pod in pods:
            renewed |= self.update(pod)
        return renewed

    def update(self, pod: Obj) -> set[ObjectKey]:
        """A pod as the parent reports it now; the objects it references anew."""
        uid = _uid(pod)
        if not uid:
            return set()
        namespace = (pod.get("metadata") or {}).get("namespace") or MASTER_NAMESPACE
        found = references(pod)
        before = self._pods.get(uid)
        self._pods[uid] = (namespace, found)
        return set(found.objects - (before[1].objects if before else frozenset()))

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def objects(self) -> set[ObjectKey]:
        return {key for _, refs in self._pods.values() for key in refs.objects}

    def tokens(self) -> set[TokenKey]:
        return {key for _, refs in self._pods.values() for key in refs.tokens}

    def namespaces(self) -> set[str]:
        return {namespace for namespace, _ in self._pods.values()} | {MASTER_NAMESPACE}


def _uid(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")
