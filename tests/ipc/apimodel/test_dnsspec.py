"""A pod's DNS fields as the API server takes them: defaults, and each refusal naming its field."""

from __future__ import annotations

from typing import Any

import pytest
from pkletd.ipc.apimodel.dnsspec import DnsConfig, DnsOption, DnsPolicy, HostAlias, PodDns
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "uid": "u1"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}], **spec},
    }


def refusal(**spec: Any) -> str:
    with pytest.raises(InvalidPod) as caught:
        parse_pod(pod(**spec))
    return str(caught.value)


def test_unset_fields_are_the_api_defaults() -> None:
    assert parse_pod(pod()).dns == PodDns(DnsPolicy.CLUSTER_FIRST)
    assert parse_pod(pod(dnsPolicy="")).dns.policy is DnsPolicy.CLUSTER_FIRST


def test_every_field_read() -> None:
    dns = parse_pod(
        pod(
            dnsPolicy="None",
            dnsConfig={
                "nameservers": ["192.0.2.53", "2001:db8::53"],
                "searches": ["corp.example.", "_srv.example", "."],
                "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}],
            },
            hostname="db-0",
            subdomain="db",
            setHostnameAsFQDN=True,
            hostAliases=[{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}],
        )
    ).dns
    assert dns == PodDns(
        policy=DnsPolicy.NONE,
        config=DnsConfig(
            ("192.0.2.53", "2001:db8::53"),
            ("corp.example.", "_srv.example", "."),
            (DnsOption("ndots", "2"), DnsOption("edns0")),
        ),
        hostname="db-0",
        subdomain="db",
        set_hostname_as_fqdn=True,
        host_aliases=(HostAlias("10.1.2.3", ("foo.local", "bar.local")),),
    )


def test_unknown_dns_policy_is_refused_naming_the_field() -> None:
    assert refusal(dnsPolicy="ClusterLast") == (
        "spec.dnsPolicy: unsupported value 'ClusterLast': supported values: 'ClusterFirst', "
        "'ClusterFirstWithHostNet', 'Default', 'None'"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"dnsPolicy": "None"},
            "spec.dnsConfig: required value: must provide `dnsConfig` when `dnsPolicy` is None",
        ),
        (
            {"dnsPolicy": "None", "dnsConfig": {"searches": ["a.example"]}},
            "spec.dnsConfig.nameservers: required value: must provide at least one DNS "
            "nameserver when `dnsPolicy` is None",
        ),
        (
            {"dnsConfig": {"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4"]}},
            "spec.dnsConfig.nameservers: invalid value ['1.1.1.1', '1.0.0.1', '8.8.8.8', "
            "'8.8.4.4']: must not have more than 3 nameservers",
        ),
        (
            {"dnsConfig": {"nameservers": ["dns.example"]}},
            "spec.dnsConfig.nameservers[0]: invalid value 'dns.example': must be a valid IP "
            "address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ),
        (
            {"dnsConfig": {"searches": [f"s{i}.example" for i in range(33)]}},
            "spec.dnsConfig.searches: invalid value: must not have more than 32 search paths",
        ),
        (
            {"dnsConfig": {"searches": ["a" * 60 + f".s{i}.example" for i in range(31)]}},
            "spec.dnsConfig.searches: invalid value: must not have more than 2048 characters "
            "(including spaces) in the search list",
        ),
        (
            {"dnsConfig": {"searches": ["Corp.Example"]}},
            "spec.dnsConfig.searches[0]: invalid value 'Corp.Example': a DNS search path must "
            "be '.' or consist of lower case alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character or '_'",
        ),
        (
            {"dnsConfig": {"options": [{"value": "2"}]}},
            "spec.dnsConfig.options[0].name: required value: must not be empty",
        ),
        (
            {"hostname": "DB_0"},
            "spec.hostname: invalid value 'DB_0': a lowercase RFC 1123 label must consist of "
            "lower case alphanumeric characters or '-', and must start and end with an "
            "alphanumeric character",
        ),
        ({"subdomain": "a" * 64}, f"spec.subdomain: invalid value '{'a' * 64}': a lowercase"),
        (
            {"hostAliases": [{"ip": "10.0.0.300", "hostnames": ["x"]}]},
            "spec.hostAliases[0].ip: invalid value '10.0.0.300': must be a valid IP address",
        ),
        (
            {"hostAliases": [{"ip": "10.0.0.3", "hostnames": ["ok", "not ok"]}]},
            "spec.hostAliases[0].hostnames[1]: invalid value 'not ok': a lowercase RFC 1123 "
            "subdomain",
        ),
        ({"setHostnameAsFQDN": "yes"}, "spec.setHostnameAsFQDN: must be true or false"),
    ],
)
def test_what_the_api_server_refuses(spec: dict[str, Any], message: str) -> None:
    assert refusal(**spec).startswith(message)
