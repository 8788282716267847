"""kube-controller-manager's CSR approver and kubelet client signer, run inline on writes.

Approver (``pkg/controller/certificates/approver``): a CSR for
``kubernetes.io/kube-apiserver-client-kubelet`` whose request is a valid node client request
is approved (condition Approved, reason ``AutoApproved``) when it is a ``nodeclient``
request from a bootstrapper (requester in ``system:bootstrappers``) or a
``selfnodeclient`` renewal (requester == the CN); any other CSR waits for someone to
write its ``approval`` subresource (``approve``/``deny`` here, or ``kubectl certificate``).
``auto_approve=False`` turns the approver off, as a cluster without it.

Signer (``pkg/controller/certificates/signer``): an approved, not yet signed client-kubelet
or kubelet-serving CSR (serving ones are never auto-approved: ``approve`` them) gets a
certificate from the cluster CA valid for ``lifetime_s`` (short in tests so rotation
happens), with the request's subject, its SANs for serving, and the client-auth or
server-auth usage.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from tests.harness.apiserver.certs import Pki
from tests.harness.apiserver.kinds.certificates import (
    CLIENT_KUBELET,
    KUBELET_SERVING,
    parse_request,
    subject,
)
from tests.harness.apiserver.store import Store, now_rfc3339

Obj = dict[str, Any]
BUCKET = "certificatesigningrequests"
BOOTSTRAPPERS = "system:bootstrappers"


def _condition(kind: str, reason: str, message: str) -> Obj:
    stamp = now_rfc3339()
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
    }


def _has(obj: Obj, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def auto_approvable(obj: Obj) -> bool:
    """nodeclient from a bootstrapper, or selfnodeclient from the node itself."""
    spec = obj["spec"]
    if spec.get("signerName") != CLIENT_KUBELET:
        return False
    cn, _ = subject(parse_request(obj))
    return BOOTSTRAPPERS in (spec.get("groups") or []) or spec.get("username") == cn


class CsrSigning:
    def __init__(self, store: Store, pki: Pki, auto_approve: bool, lifetime_s: float) -> None:
        self.store = store
        self.pki = pki
        self.auto_approve = auto_approve
        self.lifetime_s = lifetime_s

    def written(self, obj: Obj) -> None:
        """After any write of a CSR: approve, then sign, what is due."""
        if _has(obj, "Denied") or _has(obj, "Failed"):
            return
        if not _has(obj, "Approved") and self.auto_approve and auto_approvable(obj):
            obj = self._add_condition(
                obj,
                _condition(
                    "Approved",
                    "AutoApproved",
                    "Auto approving kubelet client certificate after SubjectAccessReview.",
                ),
            )
        if _has(obj, "Approved") and not (obj.get("status") or {}).get("certificate"):
            self._sign(obj)

    def approve(self, name: str, approved: bool, reason: str, message: str = "") -> None:
        """What ``kubectl certificate approve|deny`` does, as an administrator."""
        obj = self.store.get(BUCKET, "", name)
        if obj is None:
            raise KeyError(name)
        kind = "Approved" if approved else "Denied"
        self.written(self._add_condition(obj, _condition(kind, reason, message)))

    def _add_condition(self, obj: Obj, condition: Obj) -> Obj:
        status = obj.setdefault("status", {})
        status["conditions"] = [*(status.get("conditions") or []), condition]
        return self.store.update(BUCKET, obj)

    def _sign(self, obj: Obj) -> None:
        signer = obj["spec"].get("signerName")
        if signer not in (CLIENT_KUBELET, KUBELET_SERVING):
            return
        lifetime = dt.timedelta(seconds=self.lifetime_s)
        request = parse_request(obj)
        if signer == KUBELET_SERVING:
            pem = self.pki.sign_serving_request(request, lifetime)
        else:
            pem = self.pki.sign_client_request(request, lifetime)
        obj["status"]["certificate"] = base64.b64encode(pem).decode()
        self.store.update(BUCKET, obj)
