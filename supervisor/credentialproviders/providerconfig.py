"""The kubelet's ``CredentialProviderConfig`` (``kubelet.config.k8s.io/v1``), read and
checked as ``RegisterCredentialProviderPlugins`` does at start.

``--image-credential-provider-config`` names a YAML or JSON file, or a directory whose
``*.json``, ``*.yaml`` and ``*.yml`` files are read in lexical order and their providers
joined (a name may appear once in all). Each provider has:

- ``name``: the executable ``<bin-dir>/<name>`` (no ``/``, no space, not ``.`` or ``..``);
- ``matchImages``: patterns of the images it serves (``host[:port][/path]``, ``*`` globs
  per host label, as ``keyring.fits`` matches them), at least one;
- ``defaultCacheDuration``: how long an answer that names no ``cacheDuration`` is kept
  (a Go duration, required, ``0s``: not kept);
- ``apiVersion``: the ``CredentialProviderRequest``/``Response`` version the plugin speaks
  (``credentialprovider.kubelet.k8s.io/v1``, ``v1beta1`` or ``v1alpha1``);
- ``args`` and ``env`` (``[{name, value}]``): its command line and what it gets in its
  environment besides the node's.

Unknown fields are errors (the kubelet decodes strictly). ``tokenAttributes`` (service
account tokens for plugins) is refused: pkletd does not request tokens for plugins.
Every error is ``RegistrationFailed``, naming the file and the field.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pkletd.supervisor.config import parse_duration
from pkletd.supervisor.pods import keyring

CONFIG_KIND = "CredentialProviderConfig"
CONFIG_API_VERSIONS = (
    "kubelet.config.k8s.io/v1",
    "kubelet.config.k8s.io/v1beta1",
    "kubelet.config.k8s.io/v1alpha1",
)
PLUGIN_API_VERSIONS = (
    "credentialprovider.kubelet.k8s.io/v1",
    "credentialprovider.kubelet.k8s.io/v1alpha1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
)
CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
PROVIDER_FIELDS = frozenset(
    {"name", "matchImages", "defaultCacheDuration", "apiVersion", "args", "env", "tokenAttributes"}
)


class RegistrationFailed(Exception):
    """The credential provider plugins cannot be registered; the node does not start."""


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    executable: str  # <bin-dir>/<name>
    match_images: tuple[str, ...]
    default_cache_duration: float  # seconds
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # name, value


def register(config_path: str, bin_dir: str) -> tuple[Provider, ...]:
    """The providers; () when neither flag is given. ``RegistrationFailed`` if one is
    given and the configuration or an executable is not usable."""
    if not config_path and not bin_dir:
        return ()
    if not os.path.exists(bin_dir):
        raise RegistrationFailed(f"plugin binary directory {bin_dir} did not exist")
    providers: list[Provider] = []
    for path in _config_files(config_path):
        for provider in _read(path, bin_dir):
            if any(p.name == provider.name for p in providers):
                raise RegistrationFailed(
                    f'{path}: duplicate provider name "{provider.name}" found in configuration '
                    "file(s)"
                )
            providers.append(provider)
    for provider in providers:
        _check_executable(provider.executable)
    return tuple(providers)


def _config_files(config_path: str) -> list[Path]:
    if not config_path:
        raise RegistrationFailed("credential provider config path is empty")
    path = Path(config_path)
    if not path.exists():
        raise RegistrationFailed(f'unable to access path "{config_path}": no such file')
    if not path.is_dir():
        return [path]
    found = sorted(p for p in path.iterdir() if p.suffix in CONFIG_SUFFIXES and not p.is_dir())
    if not found:
        raise RegistrationFailed(f'no configuration files found in directory "{config_path}"')
    return found


def _check_executable(executable: str) -> None:
    if not os.path.exists(executable):
        raise RegistrationFailed(f"plugin binary executable {executable} did not exist")
    if os.path.isdir(executable) or not os.access(executable, os.X_OK):
        raise RegistrationFailed(
            f"error inspecting binary executable {executable}: permission denied"
        )


def _read(path: Path, bin_dir: str) -> list[Provider]:
    try:
        doc = yaml.safe_load(path.read_bytes())
    except OSError as exc:
        raise RegistrationFailed(f'unable to read file "{path}": {exc.strerror}') from None
    except yaml.YAMLError as exc:
        raise RegistrationFailed(f"{path}: not valid YAML or JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RegistrationFailed(f"{path}: must be a {CONFIG_KIND} object")
    if doc.get("kind") != CONFIG_KIND:
        raise RegistrationFailed(
            f"{path}: kind must be {CONFIG_KIND}, got {_show(doc.get('kind'))}"
        )
    if doc.get("apiVersion") not in CONFIG_API_VERSIONS:
        raise RegistrationFailed(
            f"{path}: apiVersion must be one of {', '.join(CONFIG_API_VERSIONS)}, "
            f"got {_show(doc.get('apiVersion'))}"
        )
    unknown = sorted(str(k) for k in doc if k not in ("kind", "apiVersion", "providers"))
    if unknown:
        raise RegistrationFailed(f'{path}: unknown field "{unknown[0]}"')
    items = doc.get("providers") or []
    if not isinstance(items, list) or not items:
        raise RegistrationFailed(f"{path}: providers: at least 1 item in plugins is required")
    errors: list[str] = []
    providers = [
        _provider(item, f"providers[{i}]", bin_dir, errors) for i, item in enumerate(items)
    ]
    names = [p.name for p in providers]
    errors += [
        f'providers[{i}].name: Duplicate value: "{name}"'
        for i, name in enumerate(names)
        if name in names[:i]
    ]
    if errors:
        raise RegistrationFailed(f"{path}: {'; '.join(errors)}")
    return providers


def _provider(item: Any, where: str, bin_dir: str, errors: list[str]) -> Provider:
    if not isinstance(item, dict):
        errors.append(f"{where}: must be an object, got {_show(item)}")
        return Provider("", "", (), 0.0, "")
    errors += [
        f'{where}: unknown field "{k}"' for k in sorted(map(str, item)) if k not in PROVIDER_FIELDS
    ]
    if "tokenAttributes" in item:
        errors.append(
            f"{where}.tokenAttributes: service account tokens for credential providers are "
            "not implemented by pkletd"
        )
    name = _text(item.get("name"), f"{where}.name", errors)
    errors += [f"{where}.name: {why}, got {_show(name)}" for why in _bad_name(name)]
    return Provider(
        name,
        os.path.join(bin_dir, name),
        _match_images(item.get("matchImages"), f"{where}.matchImages", errors),
        _cache_duration(item.get("defaultCacheDuration"), f"{where}.defaultCacheDuration", errors),
        _api_version(item.get("apiVersion"), f"{where}.apiVersion", errors),
        tuple(_texts(item.get("args"), f"{where}.args", errors)),
        _env(item.get("env"), f"{where}.env", errors),
    )


def _bad_name(name: str) -> list[str]:
    reasons = {
        "provider name is required": not name,
        "provider name cannot contain '/'": "/" in name,
        "provider name cannot contain spaces": " " in name,
        "provider name cannot be '.'": name == ".",
        "provider name cannot be '..'": name == "..",
    }
    return [why for why, bad in reasons.items() if bad]


def _match_images(value: Any, where: str, errors: list[str]) -> tuple[str, ...]:
    patterns = _texts(value, where, errors)
    if value is None or value == []:
        errors.append(f"{where}: Required value: at least 1 item in matchImages is required")
    for pattern in patterns:
        if not keyring.parses(pattern):
            errors.append(f"{where}: match image is invalid, got {_show(pattern)}")
    return tuple(patterns)


def _cache_duration(value: Any, where: str, errors: list[str]) -> float:
    if value is None:
        errors.append(f"{where}: Required value")
        return 0.0
    if not isinstance(value, str):
        errors.append(f'{where}: must be a duration such as "5m", got {_show(value)}')
        return 0.0
    try:
        return parse_duration(value)
    except ValueError as exc:
        errors.append(f"{where}: {exc}")
        return 0.0


def _api_version(value: Any, where: str, errors: list[str]) -> str:
    if not value:
        errors.append(f"{where}: Required value")
    elif value not in PLUGIN_API_VERSIONS:
        errors.append(
            f"{where}: Unsupported value: {_show(value)}: supported values: "
            + ", ".join(f'"{v}"' for v in sorted(PLUGIN_API_VERSIONS))
        )
    return str(value or "")


def _env(value: Any, where: str, errors: list[str]) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        errors.append(f"{where}: must be a list of {{name, value}}, got {_show(value)}")
        return ()
    pairs = []
    for i, var in enumerate(value):
        errors += [
            f'{where}[{i}]: unknown field "{k}"'
            for k in map(str, var)
            if k not in ("name", "value")
        ]
        name = _text(var.get("name"), f"{where}[{i}].name", errors)
        pairs.append((name, _text(var.get("value"), f"{where}[{i}].value", errors)))
    return tuple(pairs)


def _texts(value: Any, where: str, errors: list[str]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.append(f"{where}: must be a list of strings, got {_show(value)}")
        return []
    return value


def _text(value: Any, where: str, errors: list[str]) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.append(f"{where}: must be a string, got {_show(value)}")
        return ""
    return value


def _show(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
