"""Content negotiation and body encoding (JSON, YAML; Table and PartialObjectMetadata views).

``negotiate(accept)`` picks the first acceptable entry of the Accept header, as the real
server does: ``application/json`` (also ``*/*``), ``application/yaml``, or a JSON view
``as=Table|PartialObjectMetadata|PartialObjectMetadataList;g=meta.k8s.io;v=v1|v1beta1``.
Protobuf is not served: a request that accepts only protobuf gets 406, a protobuf body 415.
Responses end with a newline like Go's ``json.Encoder``::

    output = negotiate("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    data = encode(obj, output.media)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from tests.harness.apiserver import errors, protobuf

ACCEPTED = ("application/json", "application/yaml")
PROTOBUF = "application/vnd.kubernetes.protobuf"
BODY_TYPES = (
    "application/json",
    "application/yaml",
    PROTOBUF,
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
VIEWS = ("Table", "PartialObjectMetadata", "PartialObjectMetadataList")


@dataclass(frozen=True)
class Output:
    media: str = "application/json"
    view: str = ""  # "", Table, PartialObjectMetadata, PartialObjectMetadataList
    view_version: str = "v1"


def _entries(header: str) -> list[tuple[str, dict[str, str]]]:
    entries = []
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params = {}
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            params[key.strip()] = value.strip()
        entries.append((pieces[0].lower(), params))
    return entries


def negotiate(accept: str | None) -> Output:
    if not accept:
        return Output()
    for media, params in _entries(accept):
        if media in ("*/*", "application/*", "application/json"):
            view = params.get("as", "")
            if not view:
                return Output()
            if (
                view in VIEWS
                and params.get("g") == "meta.k8s.io"
                and params.get("v") in ("v1", "v1beta1")
            ):
                return Output("application/json", view, params["v"])
            continue
        if media in ("application/yaml", "application/vnd.kubernetes.yaml") and not params.get(
            "as"
        ):
            return Output("application/yaml")
    raise errors.not_acceptable(ACCEPTED)


def encode(obj: Any, media: str = "application/json") -> bytes:
    if media == "application/yaml":
        return yaml.safe_dump(obj, sort_keys=False).encode()
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def decode_body(data: bytes, content_type: str) -> Any:
    """A create/update body; 415 for media types the server does not read."""
    media = (content_type or "application/json").split(";", 1)[0].strip().lower()
    if media == PROTOBUF:
        try:
            return protobuf.decode(data)
        except (protobuf.ProtobufError, UnicodeDecodeError, AssertionError):
            raise errors.unsupported_media_type(media, BODY_TYPES) from None
    if media not in ("application/json", "application/yaml", "*/*"):
        raise errors.unsupported_media_type(media, BODY_TYPES)
    try:
        if media == "application/yaml":
            return yaml.safe_load(data.decode() or "null")
        return json.loads(data.decode() or "null")
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
