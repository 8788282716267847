"""The soak's table: one row per fault, what had to hold, whether it did, the figures."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Row:
    fault: str
    count: str = ""  # what was done, e.g. "200 of 200"
    checks: dict[str, bool] = field(default_factory=dict)  # must-hold -> held
    figures: list[str] = field(default_factory=list)

    def check(self, what: str, held: bool) -> bool:
        self.checks[what] = self.checks.get(what, True) and held
        return held

    def note(self, figure: str) -> None:
        self.figures.append(figure)

    @property
    def held(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    def failed(self) -> list[str]:
        return [what for what, ok in self.checks.items() if not ok]


def seconds(values: list[float]) -> str:
    """``p50 0.12 s, max 0.40 s`` (or ``-`` when nothing was measured)."""
    if not values:
        return "-"
    return f"p50 {statistics.median(values):.2f} s, max {max(values):.2f} s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(rows: list[Row]) -> str:
    lines = ["| fault | count | what held | measured |", "|---|---|---|---|"]
    for row in rows:
        held = "; ".join(f"{what}: {'yes' if ok else 'NO'}" for what, ok in row.checks.items())
        lines.append(
            f"| {_cell(row.fault)} | {_cell(row.count)} | {_cell(held)} "
            f"| {_cell('; '.join(row.figures))} |"
        )
    return "\n".join(lines)


def verdict(rows: list[Row]) -> str:
    failed = [
        f"{row.fault}: {', '.join(row.failed()) or 'nothing checked'}"
        for row in rows
        if not row.held
    ]
    return "every must-hold held" if not failed else "FAILED: " + "; ".join(failed)
