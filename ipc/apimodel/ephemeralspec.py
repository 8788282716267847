"""What an ephemeral container (``spec.ephemeralContainers[]``, an EphemeralContainerCommon
plus ``targetContainerName``) may not carry, as the API's validation refuses it.

The API keeps an allow list of a Container's fields for ephemeral containers; the others
(``ports``, ``resources``, the three probes, ``lifecycle``, ``resizePolicy``,
``restartPolicy``) are ``Forbidden: cannot be set for an Ephemeral Container``, and so
are a volume mount's ``subPath`` and ``subPathExpr``. ``podspec`` parses the rest as any
container's. Whether ``targetContainerName`` names a container is not checked here: the
API checks it against the spec, the kubelet against what runs (``unable to find target
container <name>`` when the container is started), and a pod is never refused for it.
"""

from __future__ import annotations

from typing import Any

from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel.fieldcheck import InvalidField

FORBIDDEN = (
    "ports",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resizePolicy",
    "restartPolicy",
)
FORBIDDEN_IN_MOUNTS = ("subPath", "subPathExpr")
WHY = "cannot be set for an Ephemeral Container"


def _set(value: Any) -> bool:
    """Not the Go zero value: the API's allow list lets an empty ``resources: {}`` through."""
    return value not in (None, "", [], {})


def check_fields(container: dict[str, Any], path: str) -> None:
    """Raise InvalidField for the first field an ephemeral container may not set."""
    for key in FORBIDDEN:
        if _set(container.get(key)):
            raise InvalidField(f"{path}.{key}: {WHY}")
    for i, mount in enumerate(f.items(container.get("volumeMounts"), f"{path}.volumeMounts")):
        entry = f.mapping(mount, f"{path}.volumeMounts[{i}]")
        for key in FORBIDDEN_IN_MOUNTS:
            if _set(entry.get(key)):
                raise InvalidField(f"{path}.volumeMounts[{i}].{key}: {WHY}")


def target_name(container: dict[str, Any], path: str) -> str:
    """``targetContainerName``, "" when it has none (it runs in the pod's namespaces)."""
    return f.string(container.get("targetContainerName"), f"{path}.targetContainerName")
