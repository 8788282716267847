"""Which API objects a pod references: what the pod-objects worker fetches and the
parent's volumes, environment and pulls read."""

from __future__ import annotations

from typing import Any

from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind, TokenKey, references

CM, SECRET = ObjectKind.CONFIG_MAP, ObjectKind.SECRET


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "shop", "uid": "u1"}, "spec": spec}


def test_every_place_a_pod_names_an_object_is_a_reference() -> None:
    container = {
        "name": "c",
        "env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "a"}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "b"}}},
            {"name": "C", "value": "plain"},
        ],
        "envFrom": [{"configMapRef": {"name": "from-cm"}}, {"secretRef": {"name": "from-s"}}],
    }
    refs = references(
        pod(
            initContainers=[{"name": "i", "envFrom": [{"secretRef": {"name": "init-s"}}]}],
            containers=[container],
            imagePullSecrets=[{"name": "regcred"}],
            volumes=[
                {"name": "v1", "configMap": {"name": "vol-cm"}},
                {"name": "v2", "secret": {"secretName": "vol-secret"}},
                {"name": "v3", "emptyDir": {}},
                {
                    "name": "v4",
                    "projected": {
                        "sources": [
                            {"configMap": {"name": "proj-cm"}},
                            {"secret": {"name": "proj-secret"}},
                            {"downwardAPI": {"items": []}},
                        ]
                    },
                },
            ],
        )
    )
    assert sorted(refs.objects) == sorted(
        ObjectKey(kind, "shop", name)
        for kind, name in [
            (CM, "env-cm"),
            (SECRET, "env-secret"),
            (CM, "from-cm"),
            (SECRET, "from-s"),
            (SECRET, "init-s"),
            (SECRET, "regcred"),
            (CM, "vol-cm"),
            (SECRET, "vol-secret"),
            (CM, "proj-cm"),
            (SECRET, "proj-secret"),
        ]
    )
    assert refs.tokens == frozenset()


def test_token_sources_are_keyed_by_account_audience_and_lifetime() -> None:
    sources = [
        {"serviceAccountToken": {"path": "token"}},
        {"serviceAccountToken": {"path": "vault", "audience": "vault", "expirationSeconds": 600}},
    ]
    refs = references(pod(volumes=[{"name": "t", "projected": {"sources": sources}}]))
    assert refs.tokens == {
        TokenKey("u1", "shop", "web", "default", "", 3600),
        TokenKey("u1", "shop", "web", "default", "vault", 600),
    }
    named = references(
        pod(
            serviceAccountName="builder",
            volumes=[{"name": "t", "projected": {"sources": sources[:1]}}],
        )
    )
    assert [t.service_account for t in named.tokens] == ["builder"]


def test_a_pod_without_references_has_none() -> None:
    refs = references(pod(containers=[{"name": "c", "image": "busybox"}]))
    assert refs.objects == frozenset() and refs.tokens == frozenset()
