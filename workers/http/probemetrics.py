"""The prober's counters in the Prometheus text exposition format (``/metrics/probes``)."""

from __future__ import annotations

from typing import Any

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
FAMILIES = {
    "prober_probe_total": (
        "counter",
        "Cumulative number of a liveness, readiness or startup probe for a container by result.",
    ),
    "pkletd_prober_lateness_seconds": (
        "histogram",
        "How late each probe run started against its schedule.",
    ),
}


def metrics_text(samples: list[dict[str, Any]]) -> str:
    """Samples ``{"name", "labels", "value"}`` in the Prometheus text exposition format."""
    lines: list[str] = []
    for family, (kind, help_text) in FAMILIES.items():
        mine = [s for s in samples if s["name"] == family or s["name"].startswith(family + "_")]
        if not mine:
            continue
        lines += [f"# HELP {family} {help_text}", f"# TYPE {family} {kind}"]
        for sample in mine:
            labels = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sample["labels"].items())
            lines.append(
                f"{sample['name']}{{{labels}}} {sample['value']}"
                if labels
                else f"{sample['name']} {sample['value']}"
            )
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
