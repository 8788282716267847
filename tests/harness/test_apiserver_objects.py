"""ConfigMaps and Secrets on the test API server as a kubelet meets them on a real cluster:
``immutable`` objects, the 1 MiB limit, config keys, ``stringData`` merged into ``data``, and
the docker-config Secret types, each refusal the real 422 Status."""

from __future__ import annotations

import base64
from typing import Any

from tests.harness.apiserver.client import Kube, expect_failure

IMMUTABLE = "Forbidden: field is immutable when `immutable` is set"
MIB = 1024 * 1024


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def invalid(call: Any, *args: Any) -> tuple[str, list[dict[str, str]]]:
    body = expect_failure(call, *args)
    assert (body["code"], body["reason"]) == (422, "Invalid"), body
    return body["message"], body["details"]["causes"]


def test_immutable_configmap_and_secret(kube: Kube) -> None:
    kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "frozen"}, "data": {"k": "v"}, "immutable": True}
    )
    message, causes = invalid(
        kube.core.patch_namespaced_config_map, "frozen", "default", {"data": {"k": "w"}}
    )
    assert message == f'ConfigMap "frozen" is invalid: data: {IMMUTABLE}'
    assert causes == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: field is immutable when `immutable` is set",
            "field": "data",
        }
    ]
    message, _ = invalid(
        kube.core.patch_namespaced_config_map,
        "frozen",
        "default",
        {"immutable": False, "binaryData": {"b": b64("x")}},
    )
    assert message == (
        f'ConfigMap "frozen" is invalid: [immutable: {IMMUTABLE}, binaryData: {IMMUTABLE}]'
    )
    labelled = kube.core.patch_namespaced_config_map(
        "frozen", "default", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled.metadata.labels == {"a": "b"} and labelled.data == {"k": "v"}
    result = kube.kubectl(
        "patch", "configmap", "frozen", "--type=merge", "-p", '{"data":{"k":"x"}}', check=False
    )
    assert result.returncode == 1
    assert f'The ConfigMap "frozen" is invalid: data: {IMMUTABLE}' in result.stderr

    kube.core.create_namespaced_secret(
        "default", {"metadata": {"name": "sealed"}, "stringData": {"k": "v"}, "immutable": True}
    )
    message, _ = invalid(
        kube.core.patch_namespaced_secret, "sealed", "default", {"stringData": {"k": "w"}}
    )
    assert message == f'Secret "sealed" is invalid: data: {IMMUTABLE}'
    message, _ = invalid(
        kube.core.patch_namespaced_secret, "sealed", "default", {"type": "kubernetes.io/tls"}
    )
    assert message.startswith('Secret "sealed" is invalid: [type: Invalid value: ')
    assert 'type: Invalid value: "kubernetes.io/tls": field is immutable' in message


def test_one_mebibyte_at_most(kube: Kube) -> None:
    half = "x" * (MIB // 2)
    kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "full"}, "data": {"a": half, "b": half}}
    )
    message, causes = invalid(
        kube.core.create_namespaced_config_map,
        "default",
        {"metadata": {"name": "over"}, "data": {"a": half}, "binaryData": {"b": b64(half + "x")}},
    )
    assert (
        message == 'ConfigMap "over" is invalid: []: Too long: may not be more than 1048576 bytes'
    )
    assert causes[0]["field"] == "[]" and causes[0]["reason"] == "FieldValueTooLong"
    kube.core.create_namespaced_secret(
        "default", {"metadata": {"name": "full"}, "data": {"a": b64(half), "b": b64(half)}}
    )
    message, _ = invalid(
        kube.core.create_namespaced_secret,
        "default",
        {"metadata": {"name": "over"}, "data": {"a": b64(half)}, "stringData": {"b": half + "x"}},
    )
    assert message == 'Secret "over" is invalid: data: Too long: may not be more than 1048576 bytes'


def test_config_keys(kube: Kube) -> None:
    regex_problem = (
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
        "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
        "'[-._a-zA-Z0-9]+')"
    )
    long_key = "k" * 254
    message, causes = invalid(
        kube.core.create_namespaced_config_map,
        "default",
        {
            "metadata": {"name": "keys"},
            "data": {"a b": "", ".": "", "..x": "", long_key: "", "both": "", "ok.key_1-A": ""},
            "binaryData": {"both": ""},
        },
    )
    assert [(c["field"], c["message"]) for c in causes] == [
        ("data[a b]", f'Invalid value: "a b": {regex_problem}'),
        ("data[.]", "Invalid value: \".\": must not be '.'"),
        ("data[..x]", "Invalid value: \"..x\": must not start with '..'"),
        (f"data[{long_key}]", f'Invalid value: "{long_key}": must be no more than 253 characters'),
        ("data[both]", 'Invalid value: "both": duplicate of key present in binaryData'),
    ]
    assert message.startswith('ConfigMap "keys" is invalid: [data[a b]: Invalid value: "a b": ')
    message, _ = invalid(
        kube.core.create_namespaced_secret,
        "default",
        {"metadata": {"name": "keys"}, "stringData": {"..": "x"}},
    )
    assert message == 'Secret "keys" is invalid: data[..]: Invalid value: "..": must not be \'..\''


def test_string_data_is_merged_into_data(kube: Kube) -> None:
    created = kube.core.create_namespaced_secret(
        "default",
        {
            "metadata": {"name": "mixed"},
            "data": {"a": b64("from data"), "b": b64("kept")},
            "stringData": {"a": "from stringData", "c": "new"},
        },
    )
    assert created.string_data is None and created.type == "Opaque"
    assert created.data == {"a": b64("from stringData"), "b": b64("kept"), "c": b64("new")}
    code, raw, _ = kube.raw("GET", "/api/v1/namespaces/default/secrets/mixed")
    assert code == 200 and "stringData" not in raw
    patched = kube.core.patch_namespaced_secret("mixed", "default", {"stringData": {"b": "2"}})
    assert patched.data["b"] == b64("2") and patched.data["a"] == b64("from stringData")
    shown = kube.kubectl(
        "get", "secret", "mixed", "-o", "jsonpath={.data.c}"
    ).stdout  # what kubectl sees is data only
    assert base64.b64decode(shown) == b"new"


def test_docker_config_secrets(kube: Kube) -> None:
    def create(name: str, kind: str, data: dict[str, str]) -> tuple[str, list[dict[str, str]]]:
        body = {"metadata": {"name": name}, "type": kind, "stringData": data}
        return invalid(kube.core.create_namespaced_secret, "default", body)

    json_type = "kubernetes.io/dockerconfigjson"
    message, causes = create("none", json_type, {"other": "{}"})
    assert message == 'Secret "none" is invalid: data[.dockerconfigjson]: Required value'
    assert causes[0]["reason"] == "FieldValueRequired"
    message, _ = create("bad", json_type, {".dockerconfigjson": "{auths"})
    assert message == (
        'Secret "bad" is invalid: data[.dockerconfigjson]: Invalid value: '
        "\"<secret contents redacted>\": invalid character 'a' looking for beginning of object "
        "key string"
    )
    message, _ = create("list", json_type, {".dockerconfigjson": "[]"})
    assert message.endswith(
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    )
    message, _ = create("cut", "kubernetes.io/dockercfg", {".dockercfg": '{"r": '})
    assert message == (
        'Secret "cut" is invalid: data[.dockercfg]: Invalid value: '
        '"<secret contents redacted>": unexpected end of JSON input'
    )
    auths = '{"auths": {"registry.local:5000": {"auth": "dXNlcjpwYXNz"}}}'
    good = kube.core.create_namespaced_secret(
        "default",
        {
            "metadata": {"name": "pull"},
            "type": json_type,
            "stringData": {".dockerconfigjson": auths},
        },
    )
    assert base64.b64decode(good.data[".dockerconfigjson"]).decode() == auths
    result = kube.kubectl(
        "create",
        "secret",
        "docker-registry",
        "regcred",
        "--docker-server=registry.local:5000",
        "--docker-username=user",
        "--docker-password=pass",
    )
    assert "secret/regcred created" in result.stdout
    message, causes = create("basic", "kubernetes.io/basic-auth", {"other": "x"})
    assert [c["field"] for c in causes] == ["data[%s][username]", "data[%s][password]"]
