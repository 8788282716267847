"""Small credential provider plugins the tests write: Python scripts run by this
interpreter, and the CredentialProviderConfig naming them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

V1 = "credentialprovider.kubelet.k8s.io/v1"
CONFIG_V1 = "kubelet.config.k8s.io/v1"

# Reads the request, appends it to $PLUGIN_LOG (one line per run), answers $PLUGIN_ANSWER
# (a JSON response) or exits with $PLUGIN_EXIT and a message on stderr.
PLUGIN = f"""#!{sys.executable}
import json, os, sys
request = json.load(sys.stdin)
with open(os.environ["PLUGIN_LOG"], "a") as log:
    log.write(json.dumps({{"request": request, "args": sys.argv[1:]}}) + "\\n")
if os.environ.get("PLUGIN_EXIT"):
    sys.stderr.write("no credentials for you\\n")
    sys.exit(int(os.environ["PLUGIN_EXIT"]))
sys.stdout.write(os.environ["PLUGIN_ANSWER"])
"""


def write_plugin(bin_dir: Path, name: str, body: str = PLUGIN) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(body)
    path.chmod(0o755)
    return path


def answer(auth: dict[str, tuple[str, str]], key_type: str = "Registry", **extra: Any) -> str:
    """A CredentialProviderResponse's JSON."""
    return json.dumps(
        {
            "kind": "CredentialProviderResponse",
            "apiVersion": V1,
            "cacheKeyType": key_type,
            "auth": {k: {"username": u, "password": p} for k, (u, p) in auth.items()},
            **extra,
        }
    )


def provider(name: str, *patterns: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "matchImages": list(patterns),
        "defaultCacheDuration": "5m",
        "apiVersion": V1,
        **fields,
    }


def write_config(path: Path, *providers: dict[str, Any]) -> Path:
    config = {"apiVersion": CONFIG_V1, "kind": "CredentialProviderConfig"}
    path.write_text(json.dumps({**config, "providers": list(providers)}))
    return path


def runs(log: Path) -> list[dict[str, Any]]:
    """What the plugin was asked, one entry per run."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]
