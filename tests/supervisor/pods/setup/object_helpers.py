"""Builders for the unit tests of what pods make of API objects: readings as the
pod-objects worker sends them, put straight into an ``ApiObjects``."""

from __future__ import annotations

from typing import Any

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched, ServicesListed, TokenIssued
from pkletd.supervisor.pods.objects import ApiObjects

CM, SECRET = ObjectKind.CONFIG_MAP, ObjectKind.SECRET
NAMESPACE = "shop"


def config_map(
    name: str, data: dict[str, str] | None = None, binary: dict[str, bytes] | None = None
) -> ObjectFetched:
    return ObjectFetched(CM, NAMESPACE, name, strings=data or {}, data=binary or {})


def secret(name: str, data: dict[str, bytes]) -> ObjectFetched:
    return ObjectFetched(SECRET, NAMESPACE, name, data=data, secret_type="Opaque")


def missing(kind: ObjectKind, name: str) -> ObjectFetched:
    return ObjectFetched(
        kind, NAMESPACE, name, error=f'{kind.noun} "{name}" not found', missing=True
    )


def token(uid: str, value: str, audience: str = "", seconds: int = 3600) -> TokenIssued:
    return TokenIssued(PodUID(uid), "default", audience, seconds, token=value)


def service(name: str, ip: str, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "clusterIP": ip, "ports": list(ports)}


def port(number: int, name: str = "", protocol: str = "TCP") -> dict[str, Any]:
    return {"name": name, "port": number, "protocol": protocol}


def objects_with(*readings: ObjectFetched | TokenIssued | ServicesListed) -> ApiObjects:
    objects = ApiObjects()
    for reading in readings:
        if isinstance(reading, ObjectFetched):
            objects.on_fetched(reading)
        elif isinstance(reading, TokenIssued):
            objects.on_token(reading)
        else:
            objects.on_services(reading)
    return objects
