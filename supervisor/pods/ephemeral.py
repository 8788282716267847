"""Ephemeral containers (``kubectl debug``) in a sync, as the kubelet runs them.

- ``pending``: the ones to start, those with no instance in the runtime yet
  (``computePodActions``): started in the running pod even before its init containers
  finish, and never again once one ran, whatever its end;
- ``target_id``: with ``targetContainerName``, the runtime id of the target's newest
  instance (``getTargetID``), which the CRI config turns into PID namespace ``TARGET``.
  None in the runtime: ``unable to find target container <name>``, the container's
  ``CreateContainerConfigError`` and its ``Failed`` event; the rest of the pod goes on.
"""

from __future__ import annotations

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.supervisor.pods.setup.envvars import ConfigError
from pkletd.supervisor.pods.types import PodRuntime


def pending(pod: Pod, state: PodRuntime) -> list[Container]:
    return [c for c in pod.ephemeral_containers if state.latest(c.name) is None]


def target_id(container: Container, state: PodRuntime) -> str:
    """The target's container id ("" without a target); ConfigError if it has none."""
    name = container.target_container_name
    if not name:
        return ""
    target = state.latest(name)
    if target is None:
        raise ConfigError(f"unable to find target container {name}")
    return target.id
