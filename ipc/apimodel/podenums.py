"""The closed sets of the pod model, as the API spells them: where a pod came from, its
restart and image pull policies, its phase. Each is a string enum: it travels (over the
bus, in the API's JSON) as its string, and compares equal to it.
"""

from __future__ import annotations

import enum


class PodSource(enum.StrEnum):
    """The source a pod came from (the ``kubernetes.io/config.source`` annotation): a file
    in the static pod path, the static pod URL, or the API server. The first two are
    static pods."""

    FILE = "file"
    HTTP = "http"
    API = "api"


class RestartPolicy(enum.StrEnum):
    """A pod's ``spec.restartPolicy``; ``Always`` on an init container makes it a sidecar."""

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"


class PullPolicy(enum.StrEnum):
    """A container's ``imagePullPolicy``."""

    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class PodPhase(enum.StrEnum):
    """A pod's ``status.phase`` (pkletd never reports the API's deprecated ``Unknown``)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# A pod in one of these phases has ended: it never runs again.
TERMINAL_PHASES = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
