"""Static pods as the kubelet's pod sources make them: what the file and HTTP sources share.

The kubelet's ``pkg/kubelet/config/common.go`` (``applyDefaults``) and the
duplicate check of ``config.go`` (``filterInvalidPods``), for pkletd:

- a manifest is YAML or JSON, decoded with the safe loader; one that starts with ``{``
  is read as JSON first, as the kubelet's ``ToJSON`` passes JSON through (YAML's parser
  refuses some valid JSON: a character outside the BMP escaped as a surrogate pair);
- every pod is validated as it came (``parse_pod``), given its static-pod identity,
  and validated again; one with ``spec.ephemeralContainers`` is refused, as the API's
  create validation refuses it (static pods do not support ephemeral containers);
- the identity: name ``<name>-<nodeName>``, namespace ``default`` if absent,
  ``spec.nodeName``; if the pod has no UID, one derived from its content and where
  it came from (``host:<node>file:<path>`` for a file, ``url:<url>`` for a URL);
  annotations ``kubernetes.io/config.hash`` (the UID) and
  ``kubernetes.io/config.source`` (``file`` or ``http``);
- within one source's set, a second pod with the same namespace/name is dropped
  (the first one wins) and reported;
- a pod marked deleted (``metadata.deletionTimestamp``) is not run: the kubelet stops
  such a pod at once and says nothing; pkletd's sources drop it and report which
  manifest and why (``marked_deleted``), so a pod that ran under it is stopped at once.

Everything here is pure: no I/O, so both workers and the tests call it directly.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod

SOURCE_ANNOTATION = "kubernetes.io/config.source"
HASH_ANNOTATION = "kubernetes.io/config.hash"


# The API's ValidatePodCreate, which the kubelet's sources apply to static pods too.
NO_EPHEMERAL = (
    "spec.ephemeralContainers: Forbidden: cannot be set on create "
    "(static pods do not support ephemeral containers)"
)


class ManifestError(ValueError):
    """A manifest that cannot be turned into pods; the message says why, on one line."""


# libyaml's safe loader where installed (7x faster on 100 manifests), else pure Python.
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def file_origin(path: Path, node_name: str) -> str:
    """What a file pod's generated UID is derived from, besides its content."""
    return f"host:{node_name}file:{path}"


def url_origin(url: str) -> str:
    """What a URL pod's generated UID is derived from, besides its content."""
    return f"url:{url}"


def load_documents(text: str) -> list[Any]:
    """The non-empty documents in ``text``: JSON, or YAML."""
    if text.lstrip().startswith("{"):
        try:
            return [json.loads(text)]
        except ValueError:
            pass  # a YAML flow mapping, or not valid at all: YAML says which
    try:
        return [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(f"not valid YAML or JSON: {exc}".replace("\n", " ")) from exc


def static_pod(raw: Any, source: PodSource, origin: str, node_name: str) -> dict[str, Any]:
    """One pod of a source, validated, with its static-pod identity applied."""
    try:
        if parse_pod(raw).ephemeral_containers:
            raise ManifestError(NO_EPHEMERAL)
        pod = apply_identity(raw, source, origin, node_name)
        parse_pod(pod)
    except InvalidPod as exc:
        raise ManifestError(str(exc)) from exc
    return pod


def apply_identity(
    pod: dict[str, Any], source: PodSource, origin: str, node_name: str
) -> dict[str, Any]:
    """A copy of ``pod`` with the kubelet's static-pod identity (see the module doc)."""
    pod = copy.deepcopy(pod)
    meta = pod.setdefault("metadata", {})
    if not meta.get("uid"):
        digest = hashlib.md5(usedforsecurity=False)
        digest.update(json.dumps(pod, sort_keys=True).encode())
        digest.update(origin.encode())
        meta["uid"] = digest.hexdigest()
    meta["name"] = f"{meta['name']}-{node_name}"
    meta.setdefault("namespace", "default")
    annotations = meta.setdefault("annotations", {})
    annotations[SOURCE_ANNOTATION] = source
    annotations[HASH_ANNOTATION] = meta["uid"]
    pod.setdefault("spec", {})["nodeName"] = node_name
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    return pod


def marked_deleted(pod: dict[str, Any]) -> str | None:
    """Why a static pod is not run if its manifest marks it deleted, else None."""
    if pod["metadata"].get("deletionTimestamp") is None:
        return None
    return (
        f"pod {full_name(pod)}: metadata.deletionTimestamp is set: a static pod marked "
        "deleted is not run (remove the manifest to delete the pod)"
    )


def full_name(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def first_of_each_name(
    pods: Iterable[tuple[str, dict[str, Any]]],
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Keep the first pod of each namespace/name; ``(kept, [(where, reason), ...])``.

    ``pods`` are ``(where, pod)`` pairs, ``where`` naming the pod's origin (a file
    path, a URL) for the reason given for each pod dropped.
    """
    kept: list[dict[str, Any]] = []
    first_from: dict[str, str] = {}
    dropped: list[tuple[str, str]] = []
    for where, pod in pods:
        name = full_name(pod)
        if name in first_from:
            dropped.append((where, f"duplicate pod name {name} (first from {first_from[name]})"))
            continue
        first_from[name] = where
        kept.append(pod)
    return kept, dropped
