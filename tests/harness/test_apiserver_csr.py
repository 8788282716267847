"""The CSR API and bootstrap tokens of the test API server, as a joining kubelet meets
them: a bootstrap token authenticates as ``system:bootstrap:<id>`` and may only create and
read CSRs; a node client CSR from it is approved (AutoApproved) and signed by the cluster
CA; a renewal from the node itself too; others wait for a hand approval, and a denial
sticks."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from typing import Any

import kubernetes.client
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube, eventually, expect_failure

TOKEN = "abcdef.0123456789abcdef"
SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
USAGES = ["digital signature", "key encipherment", "client auth"]


def csr_body(name: str, cn: str, orgs: tuple[str, ...] = ("system:nodes",)) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    request = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(subject))
    pem = request.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64.b64encode(pem).decode(), "signerName": SIGNER, "usages": USAGES},
    }


def certificates(kube: Kube) -> kubernetes.client.CertificatesV1Api:
    return kubernetes.client.CertificatesV1Api(kube.api)


def signed(kube: Kube, name: str) -> Callable[[], x509.Certificate | None]:
    def probe() -> x509.Certificate | None:
        found = certificates(kube).read_certificate_signing_request(name)
        if not (found.status and found.status.certificate):
            return None
        return x509.load_pem_x509_certificate(base64.b64decode(found.status.certificate))

    return probe


def test_a_bootstrap_token_gets_a_node_client_certificate(kube: Kube) -> None:
    kube.server.add_bootstrap_token(TOKEN)
    bootstrapper = kube.as_user("ignored", token=TOKEN)
    created = certificates(bootstrapper).create_certificate_signing_request(
        csr_body("node-csr-1", "system:node:n1")
    )
    assert created.spec.username == "system:bootstrap:abcdef"
    assert "system:bootstrappers" in created.spec.groups
    cert = eventually(signed(bootstrapper, "node-csr-1"), what="signed certificate")
    assert cert.subject.rfc4514_string() == "CN=system:node:n1,O=system:nodes"
    found = certificates(kube).read_certificate_signing_request("node-csr-1")
    assert [(c.type, c.reason) for c in found.status.conditions] == [("Approved", "AutoApproved")]
    assert kube.server.requests(
        user="system:bootstrap:abcdef", resource="certificatesigningrequests"
    )


def test_a_wrong_token_is_refused_and_a_bootstrapper_reads_nothing_else(kube: Kube) -> None:
    kube.server.add_bootstrap_token(TOKEN)
    wrong = kube.as_user("ignored", token="abcdef.ffffffffffffffff")
    refused = expect_failure(certificates(wrong).list_certificate_signing_request)
    assert refused["code"] == 401
    bootstrapper = kube.as_user("ignored", token=TOKEN)
    forbidden = expect_failure(bootstrapper.core.list_namespaced_pod, "default")
    assert forbidden["code"] == 403


def test_a_renewal_from_the_node_itself_is_approved(kube: Kube) -> None:
    node = kube.as_user("system:node:n1", ["system:nodes"])
    certificates(node).create_certificate_signing_request(csr_body("csr-r", "system:node:n1"))
    eventually(signed(node, "csr-r"), what="renewed certificate")


def test_another_users_request_waits_for_a_decision(kube: Kube) -> None:
    certificates(kube).create_certificate_signing_request(csr_body("csr-x", "system:node:n2"))
    found = certificates(kube).read_certificate_signing_request("csr-x")
    assert not (found.status and found.status.conditions)
    kube.server.decide_csr("csr-x", False, "Nope", "not this one")
    denied = certificates(kube).read_certificate_signing_request("csr-x")
    assert [(c.type, c.reason) for c in denied.status.conditions] == [("Denied", "Nope")]
    assert not denied.status.certificate


def test_a_request_with_the_wrong_organization_is_invalid(kube: Kube) -> None:
    failure = expect_failure(
        certificates(kube).create_certificate_signing_request,
        csr_body("csr-bad", "system:node:n1", ("evil",)),
    )
    assert failure["code"] == 422


def test_the_signer_issues_the_configured_lifetime(
    make_apiserver: Callable[..., ApiServer],
) -> None:
    server = make_apiserver(csr_certificate_lifetime_s=60.0)
    kube = Kube(server)
    try:
        node = kube.as_user("system:node:n1", ["system:nodes"])
        certificates(node).create_certificate_signing_request(csr_body("csr-s", "system:node:n1"))
        cert = eventually(signed(node, "csr-s"), what="short certificate")
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert lifetime == dt.timedelta(seconds=60)
    finally:
        kube.close()
