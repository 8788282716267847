"""Admission: the plugins of a default kube-apiserver that change what a client sees.

``admit`` runs the mutating chain before strategy validation, ``validate`` the validating
one after it, each raising the real plugin's error:

* NamespaceLifecycle: the namespace must exist (404) and not be terminating for creates
  (403); ``default``, ``kube-system`` and ``kube-public`` may not be deleted.
* NodeRestriction (``noderestriction.py``): what a ``system:node:<n>`` user may change.
* ServiceAccount: ``serviceAccountName: default``, the projected ``kube-api-access-*``
  volume mounted in every container, the service account's ``imagePullSecrets`` when the
  pod names none; mirror pods may not reference service accounts/secrets.
* Priority and DefaultTolerationSeconds: ``priority``/``preemptionPolicy`` and the two
  NoExecute tolerations of 300 s.
* RuntimeClass (``kinds/runtimeclasses.py``): the pod's class must exist; its overhead
  becomes the pod's ``spec.overhead``, its scheduling merges into the pod's.
* DefaultStorageClass (``kinds/volumes.py``): a new claim naming no class gets the default.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.auth import UserInfo
from tests.harness.apiserver.kinds import runtimeclasses
from tests.harness.apiserver.kinds.volumes import default_storage_class
from tests.harness.apiserver.noderestriction import MIRROR_ANNOTATION, NodeRestriction
from tests.harness.apiserver.store import Store

Obj = dict[str, Any]
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
SYSTEM_PRIORITIES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(length: int = 5) -> str:
    return "".join(random.choice(NAME_ALPHABET) for _ in range(length))


@dataclass
class AdmissionRequest:
    operation: str  # CREATE | UPDATE | DELETE
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    user: UserInfo
    obj: Obj | None = None
    old: Obj | None = None

    def forbid(self, why: str) -> errors.ApiError:
        name = self.name or ((self.obj or {}).get("metadata") or {}).get("name", "")
        return errors.forbidden(self.group, self.resource, name, why)


class Admission:
    def __init__(self, store: Store) -> None:
        self.store = store

    def admit(self, request: AdmissionRequest) -> None:
        self._namespace_lifecycle(request)
        NodeRestriction(self.store).admit(request)
        if request.resource == "certificatesigningrequests" and request.operation == "CREATE":
            _requester(request)
        is_pod_create = (
            request.resource == "pods"
            and not request.subresource
            and request.operation == "CREATE"
            and request.group == ""
        )
        if is_pod_create:
            assert request.obj is not None
            self._service_account(request)
            self._priority(request)
            _default_tolerations(request.obj)
            self._runtime_class(request, runtimeclasses.admit_pod)
        if (request.group, request.resource, request.subresource, request.operation) == (
            "",
            "persistentvolumeclaims",
            "",
            "CREATE",
        ):
            assert request.obj is not None
            default_storage_class(request.obj, self.store.items("storageclasses"))

    def validate(self, request: AdmissionRequest) -> None:
        if request.resource == "pods" and request.operation == "CREATE" and request.obj:
            if MIRROR_ANNOTATION in (request.obj["metadata"].get("annotations") or {}):
                _mirror_references(request)
            if request.group == "" and not request.subresource:
                self._runtime_class(request, runtimeclasses.validate_pod)

    # ----------------------------------------------------------------------- plugins

    def _namespace_lifecycle(self, request: AdmissionRequest) -> None:
        if request.resource == "namespaces" and request.group == "":
            if request.operation == "DELETE" and request.name in IMMORTAL_NAMESPACES:
                raise request.forbid("this namespace may not be deleted")
            return
        if not request.namespace or request.operation == "DELETE":
            return
        namespace = self.store.get("namespaces", "", request.namespace)
        if namespace is None:
            raise errors.not_found("", "namespaces", request.namespace)
        terminating = (namespace.get("status") or {}).get("phase") == "Terminating"
        if request.operation == "CREATE" and terminating:
            name = ((request.obj or {}).get("metadata") or {}).get("name", "")
            raise errors.namespace_terminating(
                request.group, request.resource, name, request.namespace
            )

    def _service_account(self, request: AdmissionRequest) -> None:
        pod = request.obj
        assert pod is not None
        if MIRROR_ANNOTATION in (pod["metadata"].get("annotations") or {}):
            return
        spec = pod.setdefault("spec", {})
        name = spec.get("serviceAccountName") or "default"
        spec["serviceAccountName"] = spec["serviceAccount"] = name
        sa = self.store.get("serviceaccounts", request.namespace, name)
        if sa is None:
            raise request.forbid(
                f"error looking up service account {request.namespace}/{name}:"
                f' serviceaccount "{name}" not found'
            )
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            automount = sa.get("automountServiceAccountToken", True)
        if automount:
            _mount_token_volume(spec)
        if not spec.get("imagePullSecrets") and sa.get("imagePullSecrets"):
            spec["imagePullSecrets"] = [{"name": s.get("name", "")} for s in sa["imagePullSecrets"]]

    def _runtime_class(
        self, request: AdmissionRequest, check: Callable[[Obj, Obj | None], str | None]
    ) -> None:
        assert request.obj is not None
        name = (request.obj.get("spec") or {}).get("runtimeClassName")
        found = self.store.get("runtimeclasses", "", name) if name else None
        refusal = check(request.obj, found)
        if refusal is not None:
            raise request.forbid(refusal)

    def _priority(self, request: AdmissionRequest) -> None:
        spec = (request.obj or {}).setdefault("spec", {})
        class_name = spec.get("priorityClassName", "")
        if class_name and class_name not in SYSTEM_PRIORITIES:
            raise request.forbid(f"no PriorityClass with name {class_name} was found")
        priority = SYSTEM_PRIORITIES.get(class_name, 0)
        if spec.get("priority") is not None and spec["priority"] != priority:
            raise request.forbid(
                f"the integer value of priority ({spec['priority']}) must not be provided in "
                f"pod spec; priority admission controller computed {priority} from the given "
                "PriorityClass name"
            )
        spec["priority"] = priority
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _mount_token_volume(spec: Obj) -> None:
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    if any(
        m.get("mountPath") == TOKEN_MOUNT_PATH
        for c in containers
        for m in c.get("volumeMounts") or []
    ):
        return
    name = "kube-api-access-" + random_suffix()
    spec.setdefault("volumes", []).append(
        {
            "name": name,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.namespace",
                                    },
                                }
                            ]
                        }
                    },
                ],
            },
        }
    )
    for container in containers:
        container.setdefault("volumeMounts", []).append(
            {"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}
        )


def _requester(request: AdmissionRequest) -> None:
    """The CSR strategy's PrepareForCreate: the requester's identity, not the body's."""
    assert request.obj is not None
    spec = request.obj.setdefault("spec", {})
    spec["username"] = request.user.name
    spec["groups"] = list(request.user.groups)
    if request.user.uid:
        spec["uid"] = request.user.uid
    else:
        spec.pop("uid", None)
    spec.pop("extra", None)


def _default_tolerations(pod: Obj) -> None:
    tolerations = pod.setdefault("spec", {}).setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if any(
            t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tolerations
        ):
            continue
        tolerations.append(
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        )


def _mirror_references(request: AdmissionRequest) -> None:
    spec = (request.obj or {}).get("spec") or {}
    if spec.get("serviceAccountName"):
        raise request.forbid("a mirror pod may not reference service accounts")
    for volume in spec.get("volumes") or []:
        sources = (volume.get("projected") or {}).get("sources") or []
        if volume.get("secret") is not None or any("secret" in s for s in sources):
            raise request.forbid("a mirror pod may not reference secrets")
    if spec.get("imagePullSecrets"):
        raise request.forbid("a mirror pod may not reference secrets")
