"""Import boundaries, checked in `make lint`.

- ``ipc`` imports neither ``workers`` nor ``supervisor``;
- ``ipc/apimodel`` (the API's object model) imports nothing else of pkletd;
- ``workers`` import neither the parent's machinery nor the pod logic (``supervisor``);
- the pod logic (``supervisor/pods``) never imports the parent's process machinery
  (the rest of ``supervisor``) nor ``workers``;
- the generated CRI stubs (``cri_api``) are imported by ``ipc/runtime/cri.py`` only, the
  generated pod-resources module by ``workers/podresources/servicer.py`` only, and
  containerd's events modules (``ipc/runtime/containerd``) by ``ipc/runtime/events.py`` only.

A file obeys every rule whose folder holds it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUBS = "cri_api"
STUB_OWNER = Path("ipc/runtime/cri.py")
GENERATED = {
    "pkletd.workers.podresources.podresources_pb2": Path("workers/podresources/servicer.py"),
    **{
        f"pkletd.ipc.runtime.containerd.{name}_pb2": Path("ipc/runtime/events.py")
        for name in ("events", "task", "container")
    },
}


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _outside_pods(module: str) -> bool:
    return _under(module, "pkletd.supervisor") and not _under(module, "pkletd.supervisor.pods")


# folder -> (what it must not import, said as a rule)
RULES: dict[str, tuple[Callable[[str], bool], str]] = {
    "ipc": (
        lambda m: _under(m, "pkletd.workers") or _under(m, "pkletd.supervisor"),
        "the wire protocols import neither workers nor the supervisor",
    ),
    "ipc/apimodel": (
        lambda m: _under(m, "pkletd") and not _under(m, "pkletd.ipc.apimodel"),
        "the API model imports nothing else of pkletd",
    ),
    "workers": (
        lambda m: _under(m, "pkletd.supervisor"),
        "workers import neither the parent nor the pod logic",
    ),
    "supervisor/pods": (
        lambda m: _outside_pods(m) or _under(m, "pkletd.workers"),
        "the pod logic imports neither the process machinery nor workers",
    ),
}


def imported(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def violations(root: Path = ROOT) -> list[str]:
    problems = []
    for folder, (banned, rule) in RULES.items():
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root)
            for line, module in imported(path):
                if banned(module):
                    problems.append(f"{relative}:{line}: imports {module}: {rule}")
    for top in ("ipc", "workers", "supervisor"):
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root)
            for line, module in imported(path):
                if module.split(".")[0] == STUBS and relative != STUB_OWNER:
                    problems.append(f"{relative}:{line}: only {STUB_OWNER} imports {STUBS}")
                owner = GENERATED.get(module)
                if owner is not None and relative != owner:
                    problems.append(f"{relative}:{line}: only {owner} imports {module}")
    return problems


def main() -> int:
    problems = violations()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
