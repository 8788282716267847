"""The parent's CRI calls, counted as the kubelet's instrumented runtime service counts
them: ``kubelet_runtime_operations_total``, ``..._errors_total`` and
``..._duration_seconds`` by ``operation_type``, the CRI method as the kubelet names it
(``RunPodSandbox`` is ``run_podsandbox``, ``ImageFsInfo`` is ``image_fs_info``).

``observe`` is the ``CriRuntime``'s call observer: every call of the parent's runtime
goes through it, from the loop and from the pod workers' threads. The workers' own CRI
clients (PLEG's relists, exec probes, stats) are not counted.
"""

from __future__ import annotations

import re

from pkletd.ipc.bus.messages import MetricFamily
from pkletd.ipc.bus.metricfamily import ALPHA, Counter, Histogram, exponential_buckets

LABELS = ("operation_type",)
_WORD = re.compile(r"(?<!^)(?=[A-Z])")


def operation_type(method: str) -> str:
    """The kubelet's label for a CRI method: snake case, with "pod sandbox" one word."""
    return _WORD.sub("_", method).lower().replace("pod_sandbox", "podsandbox")


class RuntimeOperations:
    def __init__(self) -> None:
        self._calls = Counter(
            "kubelet_runtime_operations_total",
            ALPHA + "Cumulative number of runtime operations by operation type.",
            LABELS,
        )
        self._errors = Counter(
            "kubelet_runtime_operations_errors_total",
            ALPHA + "Cumulative number of runtime operation errors by operation type.",
            LABELS,
        )
        self._durations = Histogram(
            "kubelet_runtime_operations_duration_seconds",
            ALPHA + "Duration in seconds of runtime operations. Broken down by operation type.",
            exponential_buckets(0.005, 2.5, 14),
            LABELS,
        )

    def observe(self, method: str, seconds: float, failed: bool) -> None:
        operation = operation_type(method)
        self._calls.inc(operation)
        self._durations.observe(seconds, operation)
        if failed:
            self._errors.inc(operation)

    def families(self) -> list[MetricFamily]:
        return [self._calls.family(), self._errors.family(), self._durations.family()]
