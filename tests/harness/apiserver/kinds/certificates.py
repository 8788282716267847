"""CertificateSigningRequests (``certificates.k8s.io/v1``, cluster-scoped) with their
``approval`` and ``status`` subresources, as ``pkg/registry/certificates``.

On create the requester's identity goes into ``spec.username``/``groups``/``uid``
(admission, which sees the user) and ``status`` is dropped. Validation: the request is a
PEM CERTIFICATE REQUEST, ``signerName`` and ``usages`` are set; for the kubelet's signers
the real server's extra rules (O exactly ``system:nodes``, CN ``system:node:*``, the
allowed usage sets). The spec never changes after create. ``approval`` writes only the
Approved/Denied conditions; ``status`` only the certificate and other conditions.
"""

from __future__ import annotations

import base64
import copy

from cryptography import x509
from cryptography.x509.oid import NameOID

from tests.harness.apiserver.kinds.base import Obj, StatusStrategy, Strategy
from tests.harness.apiserver.validation import FieldError, path_segment_name, validate_meta_update

CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
CLIENT_USAGES = (
    {"digital signature", "key encipherment", "client auth"},
    {"digital signature", "client auth"},
)
APPROVAL_TYPES = ("Approved", "Denied")


def parse_request(obj: Obj) -> x509.CertificateSigningRequest:
    pem = base64.b64decode(obj["spec"]["request"])
    return x509.load_pem_x509_csr(pem)


def subject(request: x509.CertificateSigningRequest) -> tuple[str, list[str]]:
    """(CN, O list) of the request."""
    cns = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(cns[0].value) if cns else ""), [str(o.value) for o in orgs]


class CsrStrategy(Strategy):
    kind = "CertificateSigningRequest"
    group = "certificates.k8s.io"
    model = "V1CertificateSigningRequest"
    namespaced = False
    has_status = True
    name_check = staticmethod(path_segment_name)  # ValidateCertificateRequestName

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_spec(obj)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        new["spec"] = copy.deepcopy(old["spec"])


class CsrStatusStrategy(StatusStrategy):
    """``status``: the certificate and conditions other than approval ones."""

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        kept = [c for c in _conditions(old) if c["type"] in APPROVAL_TYPES]
        others = [c for c in _conditions(new) if c["type"] not in APPROVAL_TYPES]
        new.setdefault("status", {})["conditions"] = kept + others


class CsrApprovalStrategy(StatusStrategy):
    """``approval``: the Approved/Denied conditions only; the certificate stays."""

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        status = copy.deepcopy(old.get("status") or {})
        others = [c for c in _conditions(old) if c["type"] not in APPROVAL_TYPES]
        approval = [c for c in _conditions(new) if c["type"] in APPROVAL_TYPES]
        status["conditions"] = approval + others
        new["status"] = status

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old)
        types = {c["type"] for c in _conditions(new)}
        if {"Approved", "Denied"} <= types:
            errs.append(
                FieldError.invalid(
                    "status.conditions",
                    "Approved",
                    "Approved and Denied conditions are mutually exclusive",
                )
            )
        return errs


def _conditions(obj: Obj) -> list[Obj]:
    return list((obj.get("status") or {}).get("conditions") or [])


def _validate_spec(obj: Obj) -> list[FieldError]:
    spec = obj.get("spec") or {}
    if not spec.get("signerName"):
        return [FieldError.required("spec.signerName")]
    if not spec.get("usages"):
        return [FieldError.required("spec.usages")]
    try:
        request = parse_request(obj)
    except (KeyError, ValueError, TypeError):
        return [
            FieldError.invalid("spec.request", "", "PEM block type must be CERTIFICATE REQUEST")
        ]
    if spec["signerName"] != CLIENT_KUBELET:
        return []
    cn, orgs = subject(request)
    errs = []
    if orgs != ["system:nodes"]:
        errs.append(FieldError.invalid("spec.request", "", "organization must be [system:nodes]"))
    if not cn.startswith("system:node:"):
        errs.append(FieldError.invalid("spec.request", "", 'CN must start with "system:node:"'))
    if set(spec["usages"]) not in CLIENT_USAGES:
        errs.append(FieldError.invalid("spec.usages", spec["usages"], "invalid usages"))
    return errs
