"""A container's environment from API objects and Services: envFrom with prefix and
invalid names, key references, optional, the kubelet's messages, the service
variables (which Services, precedence, enableServiceLinks) and the order of it all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.bus.messages import ServicesListed
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup import envvars, serviceenv
from pkletd.supervisor.pods.setup.envvars import ConfigError, ConfigPending

from tests.supervisor.pods.setup.object_helpers import (
    CM,
    NAMESPACE,
    config_map,
    missing,
    objects_with,
    port,
    secret,
    service,
)

NODE = NodeInfo("n", ("10.0.0.1",), Path("/var/lib/kubelet"))
MASTER = service("kubernetes", "10.96.0.1", port(443, "https"))
NO_SERVICES = (ServicesListed("default", [MASTER]), ServicesListed(NAMESPACE, []))


def pod(container: dict[str, Any], annotations: dict[str, str] | None = None, **spec: Any) -> Pod:
    return parse_pod(
        {
            "metadata": {
                "name": "web",
                "namespace": NAMESPACE,
                "uid": "u1",
                "annotations": annotations or {},
            },
            "spec": {"containers": [{"name": "c", "image": "x", **container}], **spec},
        }
    )


def env_of(p: Pod, objects: ApiObjects) -> envvars.Environment:
    return envvars.make_env(p, p.containers[0], NODE, objects)


def own(p: Pod, objects: ApiObjects) -> dict[str, str]:
    """The variables that are not the master service's."""
    return {k: v for k, v in env_of(p, objects).values if not k.startswith("KUBERNETES_")}


def test_env_from_with_prefix_skips_invalid_names() -> None:
    objects = objects_with(
        config_map("settings", {"MODE": "fast", "1st": "x", "a.b": "y"}, {"BLOB": b"no"}),
        secret("creds", {"PASSWORD": b"s3cret", "-x": b"ok", "..z": b"no"}),
        *NO_SERVICES,
    )
    p = pod(
        {
            "envFrom": [
                {"configMapRef": {"name": "settings"}},
                {"secretRef": {"name": "creds"}, "prefix": "DB_"},
            ]
        }
    )
    made = env_of(p, objects)
    # With the prefix, "..z" is "DB_..z": a valid name.
    assert own(p, objects) == {
        "MODE": "fast",
        "a.b": "y",
        "DB_PASSWORD": "s3cret",
        "DB_-x": "ok",
        "DB_..z": "no",
    }
    assert made.invalid_names == [
        "Keys [1st] from the EnvFrom configMap shop/settings were skipped since they are "
        "considered invalid environment variable names."
    ]


def test_env_from_invalid_names_of_a_secret() -> None:
    objects = objects_with(secret("creds", {"..x": b"1", ".": b"2", "ok": b"3"}), *NO_SERVICES)
    made = env_of(pod({"envFrom": [{"secretRef": {"name": "creds"}}]}), objects)
    assert made.invalid_names == [
        "Keys [., ..x] from the EnvFrom secret shop/creds were skipped since they are "
        "considered invalid environment variable names."
    ]


def test_key_references_and_their_messages() -> None:
    objects = objects_with(
        config_map("settings", {"level": "3"}, {"bin": b"x"}),
        secret("creds", {"pw": b"hunter2"}),
        missing(CM, "gone"),
        *NO_SERVICES,
    )

    def ref(kind: str, name: str, key: str, optional: bool = False) -> dict[str, Any]:
        selector = {"name": name, "key": key, "optional": optional}
        return {"env": [{"name": "V", "valueFrom": {kind: selector}}]}

    assert own(pod(ref("configMapKeyRef", "settings", "level")), objects) == {"V": "3"}
    assert own(pod(ref("secretKeyRef", "creds", "pw")), objects) == {"V": "hunter2"}
    assert own(pod(ref("configMapKeyRef", "settings", "nope", True)), objects) == {}
    assert own(pod(ref("configMapKeyRef", "gone", "k", True)), objects) == {}
    failures = {
        "couldn't find key nope in ConfigMap shop/settings": ref(
            "configMapKeyRef", "settings", "nope"
        ),
        "couldn't find key bin in ConfigMap shop/settings": ref(
            "configMapKeyRef", "settings", "bin"
        ),  # binaryData is no variable
        "couldn't find key user in Secret shop/creds": ref("secretKeyRef", "creds", "user"),
        'configmap "gone" not found': ref("configMapKeyRef", "gone", "k"),
    }
    for message, container in failures.items():
        with pytest.raises(ConfigError) as error:
            env_of(pod(container), objects)
        assert str(error.value) == message


def test_an_object_not_yet_read_makes_the_container_wait() -> None:
    p = pod({"envFrom": [{"configMapRef": {"name": "settings", "optional": True}}]})
    with pytest.raises(ConfigPending):
        env_of(p, objects_with(*NO_SERVICES))


def test_secret_bytes_that_are_not_text() -> None:
    objects = objects_with(secret("creds", {"k": b"\xff\xfe"}), *NO_SERVICES)
    with pytest.raises(ConfigError, match="couldn't use key k in Secret shop/creds"):
        env_of(pod({"envFrom": [{"secretRef": {"name": "creds"}}]}), objects)


def test_order_services_then_env_from_then_env() -> None:
    objects = objects_with(
        config_map("settings", {"A": "from-cm", "B": "from-cm"}),
        ServicesListed("default", [MASTER]),
        ServicesListed(NAMESPACE, [service("db", "10.96.0.9", port(5432))]),
    )
    container = {
        "envFrom": [{"configMapRef": {"name": "settings"}}],
        "env": [
            {"name": "B", "value": "from-env"},
            {"name": "DB_SERVICE_PORT", "value": "override"},
            {"name": "URL", "value": "https://$(KUBERNETES_SERVICE_HOST):$(DB_SERVICE_PORT)"},
        ],
    }
    names = [name for name, _ in env_of(pod(container), objects).values]
    values = dict(env_of(pod(container), objects).values)
    first_own = names.index("A")
    assert all(n.startswith(("DB_", "KUBERNETES_")) for n in names[:first_own])
    assert names[first_own:] == ["A", "B", "URL"]
    assert values["B"] == "from-env" and values["DB_SERVICE_PORT"] == "override"
    assert values["URL"] == "https://10.96.0.1:override"


def test_service_variables() -> None:
    services = [
        service("my-db.v2", "10.96.0.9", port(5432, "pg"), port(9187, "metrics", "UDP")),
        service("2fast", "fd00::9", port(80)),
        service("headless", "None", port(80)),
        service("unset", "", port(80)),
    ]
    objects = objects_with(ServicesListed("default", [MASTER]), ServicesListed(NAMESPACE, services))
    env = dict(env_of(pod({}), objects).values)
    assert env["MY_DB_V2_SERVICE_HOST"] == "10.96.0.9"
    assert env["MY_DB_V2_SERVICE_PORT"] == "5432"
    assert env["MY_DB_V2_SERVICE_PORT_PG"] == "5432"
    assert env["MY_DB_V2_SERVICE_PORT_METRICS"] == "9187"
    assert env["MY_DB_V2_PORT"] == "tcp://10.96.0.9:5432"
    assert env["MY_DB_V2_PORT_5432_TCP"] == "tcp://10.96.0.9:5432"
    assert env["MY_DB_V2_PORT_5432_TCP_PROTO"] == "tcp"
    assert env["MY_DB_V2_PORT_5432_TCP_PORT"] == "5432"
    assert env["MY_DB_V2_PORT_5432_TCP_ADDR"] == "10.96.0.9"
    assert env["MY_DB_V2_PORT_9187_UDP"] == "udp://10.96.0.9:9187"
    assert env["_2FAST_PORT"] == "tcp://[fd00::9]:80"
    assert env["_2FAST_PORT_80_TCP_ADDR"] == "fd00::9"
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert env["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert env["KUBERNETES_PORT_443_TCP"] == "tcp://10.96.0.1:443"
    assert not any(k.startswith(("HEADLESS_", "UNSET_")) for k in env)


def test_which_services_a_pod_sees() -> None:
    other = service("other", "10.96.0.5", port(1))
    mine = service("kubernetes", "10.96.0.77", port(8443))
    default_list = [MASTER, other]
    # The pod's namespace has a "kubernetes" of its own: with links, it wins.
    assert serviceenv.visible(default_list, [mine], links=True) == [mine]
    assert serviceenv.visible(default_list, [mine], links=False) == [MASTER]
    # A pod of "default" sees all of default's with links, the master only without.
    assert serviceenv.visible(default_list, default_list, links=True) == [MASTER, other]
    assert serviceenv.visible(default_list, default_list, links=False) == [MASTER]

    objects = objects_with(ServicesListed("default", default_list))  # its namespace: unread
    no_links = pod({}, enableServiceLinks=False)
    assert {k for k, _ in env_of(no_links, objects).values} == {
        name for name, _ in serviceenv.from_services([MASTER])
    }


def test_services_not_yet_listed() -> None:
    message = "services have not yet been read at least once, cannot construct envvars"
    with pytest.raises(ConfigError, match=message):
        env_of(pod({"env": [{"name": "A", "value": "1"}]}), ApiObjects())
    static = pod({"env": [{"name": "A", "value": "1"}]}, {"kubernetes.io/config.source": "file"})
    assert env_of(static, ApiObjects()).values == [("A", "1")]  # a static pod does not wait
    # A standalone node has no Services at all.
    alone = ApiObjects(standalone=True)
    assert env_of(pod({"env": [{"name": "A", "value": "1"}]}), alone).values == [("A", "1")]
