"""Import boundaries, checked in `make lint`.

- ``ipc`` imports neither ``workers`` nor ``supervisor``;
- ``ipc/apimodel`` (the API's object model) imports nothing else of pkletd;
- ``workers`` import neither the parent's machinery nor the pod logic (``supervisor``);
- the pod logic (``supervisor/pods``) never imports the parent's process machinery
  (the rest of ``supervisor``) nor ``workers``;
- the generated CRI stubs (``cri_api``) are imported by ``ipc/runtime/cri.py`` only, the
  generated pod-resources module by ``workers/podresources/servicer.py`` only, and
  containerd's events modules (``ipc/runtime/containerd``) by ``ipc/runtime/events.py`` only,
  and the CSI and plugin registration modules (``ipc/csi``) by ``ipc/csi/client.py`` only;
- no worker imports another worker: a worker is each module or package directly under
  ``workers/`` but ``lifecycle.py``, which every worker shares (and which imports none);
  what two workers need lives in a room of ``ipc``;
- no modules import each other in a circle (the imports a module runs when it is loaded,
  not those inside functions); each circle is reported with the way round it.

A file obeys every rule whose folder holds it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("ipc", "workers", "supervisor")
SHARED_BY_WORKERS = "lifecycle"
STUBS = "cri_api"
STUB_OWNER = Path("ipc/runtime/cri.py")
GENERATED = {
    "pkletd.workers.podresources.podresources_pb2": Path("workers/podresources/servicer.py"),
    **{
        f"pkletd.ipc.runtime.containerd.{name}_pb2": Path("ipc/runtime/events.py")
        for name in ("events", "task", "container")
    },
    **{
        f"pkletd.ipc.csi.{name}_pb2": Path("ipc/csi/client.py")
        for name in ("csi", "pluginregistration")
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
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root)
            for line, module in imported(path):
                if module.split(".")[0] == STUBS and relative != STUB_OWNER:
                    problems.append(f"{relative}:{line}: only {STUB_OWNER} imports {STUBS}")
                owner = GENERATED.get(module)
                if owner is not None and relative != owner:
                    problems.append(f"{relative}:{line}: only {owner} imports {module}")
    return problems + worker_crossings(root) + circles(root)


# --- workers ------------------------------------------------------------------------------


def _worker_of(module: str) -> str:
    """The worker a ``pkletd.workers...`` module belongs to ("" for the package itself)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["pkletd", "workers"] else ""


def worker_crossings(root: Path) -> list[str]:
    problems = []
    for path in sorted((root / "workers").rglob("*.py")):
        relative = path.relative_to(root)
        own = relative.parts[1].removesuffix(".py") if len(relative.parts) > 1 else ""
        if own == "__init__":
            continue
        crossings = {
            (line, _worker_of(module)): module
            for line, module in reversed(imported(path))  # the shortest name of each line
            if _worker_of(module) not in ("", own, SHARED_BY_WORKERS)
        }
        for (line, other), module in sorted(crossings.items()):
            rule = f"a worker ({own}) imports no other worker ({other})"
            problems.append(f"{relative}:{line}: imports {module}: {rule}")
    return problems


# --- circles ------------------------------------------------------------------------------


def _module_name(root: Path, path: Path) -> str:
    parts = ["pkletd", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _load_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is loaded: not those inside functions."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ExceptHandler):
                    yield from _load_time_imports(child.body)
            for field in ("body", "orelse", "finalbody"):
                yield from _load_time_imports(getattr(node, field, []))


def _targets(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The pkletd modules an import loads: ``from p import m`` loads module ``p.m`` if
    there is one, else ``p``."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        names = [f"{node.module}.{a.name}" for a in node.names if node.module]
        names = [n if n in modules else n.rpartition(".")[0] for n in names]
    return [n for n in names if n in modules]


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """module -> {module it loads: the line of the import}."""
    modules = {
        _module_name(root, path): path for top in TOPS for path in (root / top).rglob("*.py")
    }
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for node in _load_time_imports(ast.parse(path.read_text(), str(path)).body):
            for target in _targets(node, modules):
                if target != name:
                    edges.setdefault(target, node.lineno)
    return graph


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _way_round(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest circle from the component's first module back to it."""
    start = component[0]
    came_from = {start: ""}
    queue = [start]
    for node in queue:
        for target in sorted(graph[node]):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if target in component and target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise AssertionError(f"no circle in {component}")


def circles(root: Path) -> list[str]:
    graph = import_graph(root)
    problems = []
    for component in _strongly_connected(graph):
        way = _way_round(graph, component)
        first = way[0].removeprefix("pkletd.").replace(".", "/")
        where = first + ("/__init__.py" if (root / first).is_dir() else ".py")
        line = graph[way[0]][way[1]]
        problems.append(f"{where}:{line}: imports in a circle: {' -> '.join(way)}")
    return problems


def main() -> int:
    problems = violations()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
