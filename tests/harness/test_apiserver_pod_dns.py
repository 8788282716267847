"""The test API server refuses a pod's DNS fields as the real one does (so a pod pkletd
would refuse never reaches it), each refusal the real 422 Status."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.apiserver.client import Kube, expect_failure


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "dns"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"dnsPolicy": "ClusterLast"},
            'spec.dnsPolicy: Unsupported value: "ClusterLast": supported values: '
            '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"',
        ),
        (
            {"dnsPolicy": "None"},
            "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
        ),
        (
            {"dnsPolicy": "None", "dnsConfig": {"searches": ["a.example"]}},
            "spec.dnsConfig.nameservers: Required value: must provide at least one DNS "
            "nameserver when `dnsPolicy` is None",
        ),
        (
            {"dnsConfig": {"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4"]}},
            'spec.dnsConfig.nameservers: Invalid value: ["1.1.1.1","1.0.0.1","8.8.8.8",'
            '"8.8.4.4"]: must not have more than 3 nameservers',
        ),
        (
            {"hostAliases": [{"ip": "not-an-ip", "hostnames": ["a"]}]},
            'spec.hostAliases[0].ip: Invalid value: "not-an-ip": must be a valid IP address, '
            "(e.g. 10.9.8.7 or 2001:db8::ffff)",
        ),
    ],
)
def test_bad_dns_fields_are_refused(kube: Kube, spec: dict[str, Any], message: str) -> None:
    body = expect_failure(kube.core.create_namespaced_pod, "default", pod(**spec))
    assert (body["code"], body["reason"]) == (422, "Invalid"), body
    assert body["message"] == f'Pod "dns" is invalid: {message}'


def test_good_dns_fields_are_kept(kube: Kube) -> None:
    config = {
        "nameservers": ["192.0.2.53"],
        "searches": ["_srv.example.", "."],
        "options": [{"name": "ndots", "value": "2"}],
    }
    created = kube.core.create_namespaced_pod(
        "default", pod(dnsPolicy="None", dnsConfig=config, hostname="db-0", subdomain="db")
    )
    assert created.spec.dns_policy == "None"
    assert created.spec.dns_config.searches == ["_srv.example.", "."]
    assert created.spec.hostname == "db-0"
