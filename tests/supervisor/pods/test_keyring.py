"""Image pull secrets as the kubelet reads them (``dockerconfig``) and matches them to an
image (``keyring``): the two secret types, ``auth`` in base64, bad secrets, and the
keyring's registry matching (port, path prefix, globs, docker.io, most specific first)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pkletd.supervisor.pods.dockerconfig import BadPullSecret, Entry, entries
from pkletd.supervisor.pods.keyring import Keyring, normalised_repository

JSON_TYPE = "kubernetes.io/dockerconfigjson"
CFG_TYPE = "kubernetes.io/dockercfg"


def config_json(auths: Any) -> dict[str, bytes]:
    return {".dockerconfigjson": json.dumps({"auths": auths}).encode()}


def b64(text: str, padded: bool = True) -> str:
    encoded = base64.b64encode(text.encode()).decode()
    return encoded if padded else encoded.rstrip("=")


def keyring(*locations: str) -> Keyring:
    """A keyring with one entry per location, its username naming the location."""
    found = Keyring()
    found.add("regcred", [Entry(location, location, "pw") for location in locations])
    return found


def users(found: Keyring, image: str) -> list[str]:
    return [credential.username for credential in found.lookup(image)]


# --- reading the secrets ------------------------------------------------------------


def test_dockerconfigjson_with_username_and_password() -> None:
    data = config_json({"registry.example:5000": {"username": "alice", "password": "s3cret"}})
    assert entries("regcred", JSON_TYPE, data) == [
        Entry("registry.example:5000", "alice", "s3cret")
    ]


@pytest.mark.parametrize("padded", [True, False])
def test_auth_is_base64_user_colon_password_and_wins(padded: bool) -> None:
    auth = b64("bob:pa:ss", padded)  # the password may hold a colon
    data = config_json({"r.example": {"username": "alice", "password": "x", "auth": auth}})
    assert entries("regcred", JSON_TYPE, data) == [Entry("r.example", "bob", "pa:ss")]


def test_dockercfg_is_the_auths_map_alone() -> None:
    data = {".dockercfg": json.dumps({"r.example": {"auth": b64("carol:pw")}}).encode()}
    assert entries("old", CFG_TYPE, data) == [Entry("r.example", "carol", "pw")]


def test_field_names_match_in_any_case_as_go_decodes_them() -> None:
    raw = {"Auths": {"r.example": {"Username": "dave", "PASSWORD": "pw", "email": "d@x"}}}
    data = {".dockerconfigjson": json.dumps(raw).encode()}
    assert entries("regcred", JSON_TYPE, data) == [Entry("r.example", "dave", "pw")]


@pytest.mark.parametrize(
    ("secret_type", "data"),
    [
        ("Opaque", config_json({"r.example": {"username": "u"}})),
        (JSON_TYPE, {}),  # no key
        (JSON_TYPE, {".dockerconfigjson": b""}),  # empty
        (CFG_TYPE, config_json({"r.example": {"username": "u"}})),  # the other type's key
        (JSON_TYPE, {".dockerconfigjson": b"{}"}),  # no auths
    ],
)
def test_secrets_that_hold_no_docker_config_give_nothing(
    secret_type: str, data: dict[str, bytes]
) -> None:
    assert entries("regcred", secret_type, data) == []


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            {".dockerconfigjson": b'{"auths": {"r": {"password": "s3cret"'},
            'image pull secret "regcred": .dockerconfigjson: invalid JSON: ',
        ),
        (
            {".dockerconfigjson": b'{"auths": "s3cret"}'},
            'image pull secret "regcred": .dockerconfigjson: auths: must be a JSON object, '
            "got string",
        ),
        (
            config_json({"r.example": {"username": 7, "password": "s3cret"}}),
            'image pull secret "regcred": .dockerconfigjson: auths["r.example"].username: '
            "must be a string, got number",
        ),
        (
            config_json({"r.example": {"auth": "s3cret!!"}}),
            'image pull secret "regcred": .dockerconfigjson: auths["r.example"].auth: not '
            "base64 of UTF-8 text, must be formatted as base64(username:password)",
        ),
        (
            config_json({"r.example": {"auth": b64("s3cret")}}),
            'image pull secret "regcred": .dockerconfigjson: auths["r.example"].auth: unable '
            "to parse auth field, must be formatted as base64(username:password)",
        ),
    ],
)
def test_a_bad_secret_names_itself_and_the_field_never_a_value(
    data: dict[str, bytes], error: str
) -> None:
    with pytest.raises(BadPullSecret) as raised:
        entries("regcred", JSON_TYPE, data)
    assert str(raised.value).startswith(error), raised.value
    assert "s3cret" not in str(raised.value)


def test_an_entry_never_shows_its_password() -> None:
    assert "s3cret" not in repr(Entry("r.example", "alice", "s3cret"))
    found = Keyring()
    found.add("regcred", [Entry("r.example", "alice", "s3cret")])
    assert "s3cret" not in repr(found.lookup("r.example/app"))


# --- matching an image ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("busybox", "docker.io/library/busybox"),
        ("busybox:1.36", "docker.io/library/busybox"),
        ("team/app@sha256:" + "a" * 64, "docker.io/team/app"),
        ("index.docker.io/team/app:v1", "docker.io/team/app"),
        ("docker.io/busybox", "docker.io/library/busybox"),
        ("localhost/app", "localhost/app"),
        ("localhost:5000/app:v1", "localhost:5000/app"),
        ("127.0.0.1:5000/team/app:v1", "127.0.0.1:5000/team/app"),
        ("quay.io/team/app:v1@sha256:" + "b" * 64, "quay.io/team/app"),
    ],
)
def test_images_are_looked_up_by_their_full_repository(image: str, repository: str) -> None:
    assert normalised_repository(image) == repository


@pytest.mark.parametrize(
    ("location", "image", "fits"),
    [
        ("127.0.0.1:5000", "127.0.0.1:5000/app:v1", True),
        ("127.0.0.1:5000", "127.0.0.1:5001/app:v1", False),  # another port
        ("127.0.0.1", "127.0.0.1:5000/app:v1", False),  # a port the key does not name
        ("http://127.0.0.1:5000/v2/", "127.0.0.1:5000/app:v1", True),  # scheme, API root
        ("registry.example/team", "registry.example/team/app", True),
        ("registry.example/team", "registry.example/other/app", False),
        ("*.example.com", "eu.example.com/app", True),
        ("*.example.com", "example.com/app", False),  # as many labels, or no match
        ("*.example.com", "a.eu.example.com/app", False),
        ("eu.*.com", "eu.example.com/app", True),
        ("docker.io", "busybox", True),
        ("https://index.docker.io/v1/", "busybox", True),  # the default registry's key
        ("https://index.docker.io/v1/", "team/app:v1", True),
        ("https://index.docker.io/v1/", "quay.io/team/app", False),
        ("registry.example:port", "registry.example:port/app", False),  # Go refuses the key
        ("registry example", "registry example/app", False),
    ],
)
def test_a_key_fits_as_the_kubelets_keyring_matches(location: str, image: str, fits: bool) -> None:
    assert users(keyring(location), image) == ([location] if fits else [])


def test_most_specific_key_first_then_each_in_the_order_added() -> None:
    found = Keyring()
    found.add("first", [Entry("quay.io", "a", "pw"), Entry("quay.io/team", "b", "pw")])
    found.add("second", [Entry("https://quay.io", "c", "pw"), Entry("*.io", "d", "pw")])
    assert users(found, "quay.io/team/app:v1") == ["b", "a", "c", "d"]
    assert [(c.secret, c.registry) for c in found.lookup("quay.io/team/app")][:2] == [
        ("first", "quay.io/team"),
        ("first", "quay.io"),
    ]


def test_the_default_registry_key_only_when_nothing_else_fits() -> None:
    found = keyring("https://index.docker.io/v1/", "docker.io/team")
    assert users(found, "team/app") == ["docker.io/team"]
    assert users(found, "busybox") == ["https://index.docker.io/v1/"]
