"""The pod-objects worker's API calls, through the official client, each rate-limited
by the one ``LimitedApiClient`` (``kubeAPIQPS``/``kubeAPIBurst``) every thread shares.

Objects are read raw (``_preload_content=False``): the JSON stays as the API sent it,
and the client never logs a body, so a Secret's data never reaches a log line even
at debug level. The node authorizer lets a node read only what its pods reference,
one object at a time: a ConfigMap or Secret is listed and watched with
``fieldSelector=metadata.name=<name>``, as the kubelet's watch-based manager does.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Callable
from typing import Any

import kubernetes.client
from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apiclient.reflector import ListCall
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind, TokenKey
from pkletd.workers.podobjects.tokens import Issued

Obj = dict[str, Any]


def name_selector(name: str) -> str:
    return f"metadata.name={name}"


class ApiCalls:
    def __init__(self, client: kubeapi.LimitedApiClient) -> None:
        self._client = client
        self._core = kubernetes.client.CoreV1Api(client)

    def object_lister(self, key: ObjectKey) -> ListCall:
        """Lists (and watches) the ConfigMaps or Secrets of the object's namespace."""
        if key.kind is ObjectKind.CONFIG_MAP:
            return functools.partial(self._core.list_namespaced_config_map, key.namespace)
        return functools.partial(self._core.list_namespaced_secret, key.namespace)

    def node_lister(self) -> ListCall:
        return self._core.list_node

    def services_lister(self) -> ListCall:
        return self._core.list_service_for_all_namespaces

    def runtime_classes_lister(self) -> ListCall:
        return kubernetes.client.NodeV1Api(self._client).list_runtime_class

    def read(self, key: ObjectKey) -> Obj:
        """One GET of the object (the Cache and Get strategies, and every storage object:
        the node authorizer lets a node only get those); ApiException 404 if gone."""
        storage = kubernetes.client.StorageV1Api(self._client)
        reads: dict[ObjectKind, Callable[..., Any]] = {
            ObjectKind.CONFIG_MAP: self._core.read_namespaced_config_map,
            ObjectKind.SECRET: self._core.read_namespaced_secret,
            ObjectKind.PERSISTENT_VOLUME_CLAIM: self._core.read_namespaced_persistent_volume_claim,
            ObjectKind.PERSISTENT_VOLUME: self._core.read_persistent_volume,
            ObjectKind.CSI_DRIVER: storage.read_csi_driver,
            ObjectKind.VOLUME_ATTACHMENT: storage.read_volume_attachment,
        }
        where = (key.namespace,) if key.namespace else ()
        response = reads[key.kind](
            key.name,
            *where,
            _preload_content=False,
            _request_timeout=kubeapi.REQUEST_TIMEOUT_S,
        )
        return _json(response)

    def request_token(self, key: TokenKey) -> Issued:
        """A TokenRequest for the pod's service account, bound to the pod, for the
        audience ("" leaves the API server's own) and lifetime the pod asked for."""
        spec = kubernetes.client.V1TokenRequestSpec(
            audiences=[key.audience] if key.audience else None,
            expiration_seconds=key.expiration_seconds,
            bound_object_ref=kubernetes.client.V1BoundObjectReference(
                api_version="v1", kind="Pod", name=key.pod_name, uid=key.pod_uid
            ),
        )
        response = self._core.create_namespaced_service_account_token(
            key.service_account,
            key.namespace,
            kubernetes.client.AuthenticationV1TokenRequest(spec=spec),
            _preload_content=False,
            _request_timeout=kubeapi.REQUEST_TIMEOUT_S,
        )
        answer = _json(response)
        status, issued_spec = answer.get("status") or {}, answer.get("spec") or {}
        expires = dt.datetime.fromisoformat(str(status["expirationTimestamp"])).timestamp()
        lifetime = float(issued_spec.get("expirationSeconds") or key.expiration_seconds)
        return Issued(str(status["token"]), expires, lifetime)

    def close(self) -> None:
        self._client.close()


def _json(response: Any) -> Obj:
    try:
        found = json.loads(response.data)
    finally:
        response.release_conn()
    if not isinstance(found, dict):
        raise ValueError(f"the API answered a {type(found).__name__}, not an object")
    return found
