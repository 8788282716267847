"""The real Kubernetes control plane for the tests and ``make cluster`` (see ``cluster.py``),
from binaries built from Go modules (``binaries.py``)."""

from tests.harness.controlplane.cluster import ComponentError, ControlPlane, Options

__all__ = ["ComponentError", "ControlPlane", "Options"]
