"""What the status manager knows of each pod, mirror pod and final delete."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pkletd.ipc.apiclient.retry import Retry
from pkletd.workers.statusmanager import mirrors, podstatus

Obj = dict[str, Any]


@dataclass(slots=True)
class PodEntry:
    """A pod the parent reports, with its status; static pods' statuses go to their
    mirror pods."""

    uid: str
    namespace: str
    name: str
    pod: Obj  # as the parent sent it: metadata, spec, status
    static_hash: str | None  # None for an API pod
    written: Obj | None = None  # what the API has of ours (written, or seen watched)...
    written_uid: str = ""  # ...in the API pod with this UID
    seen_uid: str = ""  # the API pod last compared (written or watched)...
    seen_version: str = ""  # ...at this resourceVersion: an older view changes nothing
    scheduled: bool = True  # the API pod has PodScheduled: ours is not sent
    skipped: bool = False  # the API pod of this name has another UID: left alone
    refused: Obj | None = None  # a status the API refused (403, 422...): not sent again
    forgotten: bool = False  # the parent let it go: kept until its last status is written
    retry: Retry = field(default_factory=Retry)

    @classmethod
    def of(cls, pod: Obj) -> PodEntry:
        meta = pod["metadata"]
        static = mirrors.static_hash(pod) if podstatus.is_static(pod) else None
        return cls(meta["uid"], meta.get("namespace") or "default", meta["name"], pod, static)

    @property
    def status(self) -> Obj:
        found: Obj = self.pod.get("status") or {}
        return found

    @property
    def where(self) -> tuple[str, str]:
        return self.namespace, self.name


@dataclass(slots=True)
class MirrorSlot:
    """A static pod's name in the API, where its mirror pod lives."""

    namespace: str
    name: str
    want_uid: str = ""  # the static pod that wants a mirror here ("" none)
    seen: mirrors.Seen = mirrors.UNKNOWN
    forgotten: set[str] = field(default_factory=set)  # hashes of static pods let go
    warned_other: bool = False
    retry: Retry = field(default_factory=Retry)
    version: str = ""  # the resourceVersion of what ``seen`` shows ("" never seen)
    gone: set[str] = field(default_factory=set)  # UIDs the watch saw deleted during a call


@dataclass(slots=True)
class FinalDelete:
    """A terminated API pod to delete (grace 0, UID precondition), then report."""

    uid: str
    namespace: str
    name: str
    retry: Retry = field(default_factory=Retry)
