"""CredentialProviderConfig read and checked as the kubelet registers its plugins: the
providers of a file or a directory, every field's error naming the file and the field,
the bin dir and each plugin's executable required."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.supervisor.credentialproviders.providerconfig import (
    Provider,
    RegistrationFailed,
    register,
)

from tests.supervisor.credentialproviders.plugin_helpers import (
    V1,
    provider,
    write_config,
    write_plugin,
)


def failure(config: str, bin_dir: str) -> str:
    with pytest.raises(RegistrationFailed) as failed:
        register(config, bin_dir)
    return str(failed.value)


def test_no_flags_no_providers() -> None:
    assert register("", "") == ()


def test_a_provider_read_in_full(tmp_path: Path) -> None:
    write_plugin(tmp_path / "bin", "ecr")
    item = provider(
        "ecr",
        "*.dkr.ecr.*.amazonaws.com",
        "registry.example:5000/team",
        args=["get-credentials", "-v"],
        env=[{"name": "AWS_PROFILE", "value": "node"}],
        defaultCacheDuration="12h",
    )
    config = write_config(tmp_path / "config.json", item)
    assert register(str(config), str(tmp_path / "bin")) == (
        Provider(
            "ecr",
            str(tmp_path / "bin" / "ecr"),
            ("*.dkr.ecr.*.amazonaws.com", "registry.example:5000/team"),
            12 * 3600.0,
            V1,
            ("get-credentials", "-v"),
            (("AWS_PROFILE", "node"),),
        ),
    )


def test_a_yaml_file_and_a_directory_in_lexical_order(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        write_plugin(tmp_path / "bin", name)
    conf = tmp_path / "conf.d"
    conf.mkdir()
    write_config(conf / "20-b.json", provider("b", "b.example"))
    (conf / "10-a.yaml").write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        f"- name: a\n  matchImages: [a.example]\n  defaultCacheDuration: 1m\n  apiVersion: {V1}\n"
    )
    write_config(conf / "30-c.yml.off", provider("c", "c.example"))  # not a config file
    names = [p.name for p in register(str(conf), str(tmp_path / "bin"))]
    assert names == ["a", "b"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "a/b"}, "providers[0].name: provider name cannot contain '/', got \"a/b\""),
        ({"name": ".."}, "providers[0].name: provider name cannot be '..', got \"..\""),
        ({"matchImages": []}, "providers[0].matchImages: Required value: at least 1 item"),
        (
            {"matchImages": ["registry.example:port"]},
            'providers[0].matchImages: match image is invalid, got "registry.example:port"',
        ),
        ({"defaultCacheDuration": None}, "providers[0].defaultCacheDuration: Required value"),
        (
            {"defaultCacheDuration": "-1m"},
            'providers[0].defaultCacheDuration: negative duration "-1m" is not allowed',
        ),
        (
            {"apiVersion": "credentialprovider.kubelet.k8s.io/v2"},
            'providers[0].apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v2"',
        ),
        ({"args": "get"}, 'providers[0].args: must be a list of strings, got "get"'),
        ({"env": [{"name": "A", "valu": "x"}]}, 'providers[0].env[0]: unknown field "valu"'),
        ({"matchImage": ["x"]}, 'providers[0]: unknown field "matchImage"'),
        (
            {"tokenAttributes": {"serviceAccountTokenAudience": "x"}},
            "providers[0].tokenAttributes: service account tokens for credential providers "
            "are not implemented by pkletd",
        ),
    ],
)
def test_a_bad_field_is_named_with_the_file(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    write_plugin(tmp_path, "ecr")
    item = {k: v for k, v in {**provider("ecr", "x.example"), **change}.items() if v is not None}
    config = write_config(tmp_path / "config.json", item)
    error = failure(str(config), str(tmp_path))
    assert error.startswith(f"{config}: ")
    assert message in error


def test_every_bad_field_at_once_and_duplicate_names(tmp_path: Path) -> None:
    write_plugin(tmp_path, "ecr")
    config = write_config(
        tmp_path / "config.json",
        provider("ecr", "x.example", defaultCacheDuration="soon"),
        provider("ecr", "y.example"),
    )
    error = failure(str(config), str(tmp_path))
    assert 'providers[0].defaultCacheDuration: invalid duration "soon"' in error
    assert 'providers[1].name: Duplicate value: "ecr"' in error


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{}", "kind must be CredentialProviderConfig"),
        ("kind: CredentialProviderConfig\napiVersion: v1", "apiVersion must be one of"),
        (
            "kind: CredentialProviderConfig\napiVersion: kubelet.config.k8s.io/v1\n",
            "providers: at least 1 item in plugins is required",
        ),
        ("providers: [", "not valid YAML or JSON"),
    ],
)
def test_a_bad_document(tmp_path: Path, body: str, message: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(body)
    assert failure(str(config), str(tmp_path)).startswith(f"{config}: {message}")


def test_the_bin_dir_the_executable_and_the_config_must_exist(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.json", provider("ecr", "x.example"))
    gone = tmp_path / "gone"
    assert failure(str(config), str(gone)) == f"plugin binary directory {gone} did not exist"
    assert failure(str(config), str(tmp_path)) == (
        f"plugin binary executable {tmp_path / 'ecr'} did not exist"
    )
    (tmp_path / "ecr").write_text("not executable")
    assert failure(str(config), str(tmp_path)) == (
        f"error inspecting binary executable {tmp_path / 'ecr'}: permission denied"
    )
    assert failure("", str(tmp_path)) == "credential provider config path is empty"
    missing = tmp_path / "missing.yaml"
    assert (
        failure(str(missing), str(tmp_path)) == f'unable to access path "{missing}": no such file'
    )
