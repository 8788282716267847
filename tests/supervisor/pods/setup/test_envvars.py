"""Environment variables: $(VAR) expansion, the downward API, the kubelet's ordering rules."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.envspec import ResourceRef
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup import downward, envvars
from pkletd.supervisor.pods.setup.envvars import ConfigError, expand

NODE = NodeInfo(
    "node-a",
    ("192.0.2.10", "2001:db8::10"),
    Path("/var/lib/kubelet"),
    cpu=Fraction(4),
    memory=Fraction(8 * 2**30),
    ephemeral_storage=Fraction(100 * 10**9),
)
STANDALONE = ApiObjects(standalone=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "alpha"),
        ("x-$(A)-$(B)-y", "x-alpha-beta-y"),
        ("$$(A)", "$(A)"),  # escaped
        ("$$$(A)", "$alpha"),
        ("$$$$", "$$"),
        ("$(MISSING)", "$(MISSING)"),  # undefined: left as written
        ("$(A", "$(A"),  # unclosed
        ("$()", "$()"),
        ("$A", "$A"),  # not a reference
        ("a$", "a$"),  # a final $
        ("$", "$"),
        ("$(EMPTY)!", "!"),
        ("$(A)$(A)", "alphaalpha"),
        ("$(A)(B)", "alpha(B)"),
        ("ünïcode $(A) ✓", "ünïcode alpha ✓"),
        ("", ""),
    ],
)
def test_expansion(text: str, expected: str) -> None:
    assert expand(text, {"A": "alpha", "B": "beta", "EMPTY": ""}) == expected


def test_expansion_collects_missing_names() -> None:
    missing: set[str] = set()
    assert expand("$(A)/$(X)/$(Y)/$$(Z)", {"A": "a"}, missing) == "a/$(X)/$(Y)/$(Z)"
    assert missing == {"X", "Y"}


def pod(**extra: Any) -> Any:
    container: dict[str, Any] = {
        "name": "app",
        "image": "busybox",
        "resources": {"limits": {"memory": "1536Ki"}, "requests": {"cpu": "250m"}},
    }
    container.update(extra.pop("container", {}))
    raw = {
        "metadata": {
            "name": "web",
            "namespace": "prod",
            "uid": "1234",
            "labels": {"app": "web", "tier": "front"},
            "annotations": {"quote": 'say "hi"\n', "unicode": "é"},
        },
        "spec": {"nodeName": "node-a", "containers": [container], **extra},
    }
    return parse_pod(raw)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.name", "web"),
        ("metadata.namespace", "prod"),
        ("metadata.uid", "1234"),
        ("metadata.labels['tier']", "front"),
        ("metadata.labels['absent']", ""),
        ("metadata.annotations['quote']", 'say "hi"\n'),
        ("metadata.labels", 'app="web"\ntier="front"'),
        ("metadata.annotations", 'quote="say \\"hi\\"\\n"\nunicode="é"'),
        ("spec.nodeName", "node-a"),
        ("spec.serviceAccountName", ""),
        ("status.hostIP", "192.0.2.10"),
        ("status.hostIPs", "192.0.2.10,2001:db8::10"),
        ("status.podIP", "10.88.0.7"),
        ("status.podIPs", "10.88.0.7"),
    ],
)
def test_field_refs(path: str, expected: str) -> None:
    assert downward.field_value(pod(), path, ("10.88.0.7",), NODE.host_ips) == expected


def test_service_account_from_the_deprecated_field() -> None:
    assert downward.field_value(pod(serviceAccount="old"), "spec.serviceAccountName") == "old"
    both = pod(serviceAccount="old", serviceAccountName="new")
    assert downward.field_value(both, "spec.serviceAccountName") == "new"


def test_go_quote() -> None:
    assert downward.go_quote('a"b\\c\td\x01\x7f\u200b😀') == '"a\\"b\\\\c\\td\\x01\\x7f\\u200b😀"'


@pytest.mark.parametrize(
    ("resource", "divisor", "expected"),
    [
        ("limits.memory", "1", str(1536 * 1024)),
        ("limits.memory", "1Mi", "2"),  # 1.5Mi rounds up
        ("limits.memory", "1k", "1573"),
        ("limits.cpu", "1", "4"),  # no limit: allocatable
        ("limits.cpu", "1m", "4000"),
        ("requests.cpu", "1", "1"),  # 250m rounds up to 1
        ("requests.cpu", "1m", "250"),
        ("requests.memory", "1", str(1536 * 1024)),  # no request: the limit (API defaulting)
        ("limits.ephemeral-storage", "1G", "100"),
        ("requests.ephemeral-storage", "1", "0"),
        ("limits.hugepages-2Mi", "1", "0"),
    ],
)
def test_resource_refs(resource: str, divisor: str, expected: str) -> None:
    from pkletd.ipc.apimodel import quantity

    ref = ResourceRef(resource, "", quantity.parse(divisor))
    assert downward.resource_value(pod(), "app", ref, NODE) == expected


def test_resource_ref_of_an_unknown_container() -> None:
    with pytest.raises(LookupError, match="container other not found"):
        downward.resource_value(pod(), "app", ResourceRef("limits.cpu", "other"), NODE)


def test_make_env_order_overrides_and_sources() -> None:
    env = [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "$(A)-$(C)"},
        {"name": "C", "value": "3"},
        {"name": "A", "value": "$(A)$(A)"},  # a later definition replaces, seeing the earlier
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "EMPTY"},
        {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": True}}},
    ]
    p = pod(container={"env": env, "envFrom": [{"configMapRef": {"name": "x", "optional": True}}]})
    made = envvars.make_env(p, p.containers[0], NODE, STANDALONE, ("10.88.0.7",)).values
    assert made == [("A", "11"), ("B", "1-$(C)"), ("C", "3"), ("NAME", "web"), ("EMPTY", "")]


def test_value_from_is_not_expanded() -> None:
    p = pod(
        container={
            "env": [
                {"name": "X", "value": "x"},
                {"name": "L", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['t']"}}},
            ]
        }
    )
    p = parse_pod({**p.raw, "metadata": {**p.raw["metadata"], "labels": {"t": "$(X)"}}})
    assert dict(envvars.make_env(p, p.containers[0], NODE, STANDALONE).values)["L"] == "$(X)"


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"envFrom": [{"configMapRef": {"name": "settings"}}]}, 'configmap "settings" not found'),
        (
            {"envFrom": [{"secretRef": {"name": "creds"}, "prefix": "DB_"}]},
            'secret "creds" not found',
        ),
        (
            {"env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]},
            'secret "db" not found',
        ),
        (
            {"env": [{"name": "P", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]},
            'configmap "c" not found',
        ),
        (
            {
                "env": [
                    {
                        "name": "R",
                        "valueFrom": {
                            "resourceFieldRef": {"containerName": "nope", "resource": "limits.cpu"}
                        },
                    }
                ]
            },
            "container nope not found",
        ),
    ],
)
def test_make_env_errors(container: dict[str, Any], message: str) -> None:
    p = pod(container=container)
    with pytest.raises(ConfigError) as error:
        envvars.make_env(p, p.containers[0], NODE, STANDALONE)
    assert str(error.value) == message


def test_command_and_args_expansion() -> None:
    p = pod(container={"command": ["run", "$(A)", "$$(A)"], "args": ["--to=$(B)", "$(NONE)"]})
    command, args = envvars.expand_command(p.containers[0], [("A", "1"), ("B", "two")])
    assert command == ("run", "1", "$(A)")
    assert args == ("--to=two", "$(NONE)")


@pytest.mark.parametrize(
    ("env", "field"),
    [
        (
            [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.hostname"}}}],
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: unsupported value",
        ),
        (
            [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}}],
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: unsupported value",
        ),
        (
            [{"name": "X", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "x"}}}],
            "spec.containers[0].env[0].valueFrom.fieldRef.apiVersion",
        ),
        (
            [
                {
                    "name": "X",
                    "value": "v",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                }
            ],
            "spec.containers[0].env[0].valueFrom: invalid value: may not be specified when",
        ),
        ([{"name": "X", "valueFrom": {}}], "spec.containers[0].env[0].valueFrom: invalid value"),
        (
            [{"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}],
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource",
        ),
        (
            [
                {
                    "name": "X",
                    "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1Mi"}},
                }
            ],
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: invalid value",
        ),
        (
            [
                {
                    "name": "X",
                    "valueFrom": {
                        "resourceFieldRef": {"resource": "limits.memory", "divisor": "3"}
                    },
                }
            ],
            "are supported with the memory resource",
        ),
        (
            [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "c"}}}],
            "spec.containers[0].env[0].valueFrom.configMapKeyRef.key: required value",
        ),
        ([{"name": "1X"}], "spec.containers[0].env[0].name"),
        ([{"name": ".."}], "spec.containers[0].env[0].name"),
        ([{"name": "..x"}], "spec.containers[0].env[0].name"),
    ],
)
def test_env_validation_names_the_field(env: list[dict[str, Any]], field: str) -> None:
    raw = pod().raw
    raw["spec"]["containers"][0]["env"] = env
    with pytest.raises(InvalidPod, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_pod(raw)


def test_env_from_validation() -> None:
    raw = pod().raw
    raw["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "a"}, "secretRef": {}}]
    with pytest.raises(InvalidPod, match=r"spec.containers\[0\].envFrom\[0\]: invalid value"):
        parse_pod(raw)
