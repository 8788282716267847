"""Import boundaries, checked in `make lint`.

- ``ipc`` imports neither ``workers`` nor ``supervisor``;
- ``workers`` never import the ``supervisor``;
- the generated CRI stubs (``cri_api``) are imported by ``ipc/cri.py`` only.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "ipc": ("pkletd.workers", "pkletd.supervisor"),
    "workers": ("pkletd.supervisor",),
    "supervisor": (),
}
STUBS = "cri_api"
STUB_OWNER = Path("ipc/cri.py")


def imported(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
    return found


def violations() -> list[str]:
    problems = []
    for package, banned in FORBIDDEN.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            for line, module in imported(path):
                if any(module == b or module.startswith(b + ".") for b in banned):
                    problems.append(f"{relative}:{line}: {package} must not import {module}")
                if module.split(".")[0] == STUBS and relative != STUB_OWNER:
                    problems.append(f"{relative}:{line}: only {STUB_OWNER} imports {STUBS}")
    return problems


def main() -> int:
    problems = violations()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
