"""The import linter finds each crossing of a subsystem boundary and each circle of imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import lint_imports


@pytest.mark.parametrize(
    ("path", "module", "rule"),
    [
        ("supervisor/pods/x.py", "pkletd.supervisor.agent", "process machinery"),
        ("supervisor/pods/setup/x.py", "pkletd.workers.pleg", "process machinery nor workers"),
        ("workers/x.py", "pkletd.supervisor.pods.book", "neither the parent nor the pod logic"),
        ("ipc/x.py", "pkletd.supervisor", "neither workers nor the supervisor"),
        ("ipc/apimodel/x.py", "pkletd.ipc.runtime.cri", "imports nothing else of pkletd"),
        ("workers/x.py", "cri_api.v1", "only ipc/runtime/cri.py imports cri_api"),
    ],
)
def test_a_crossing_is_reported(tmp_path: Path, path: str, module: str, rule: str) -> None:
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text(f"import {module}\n")
    problems = lint_imports.violations(tmp_path)
    assert any(p.startswith(f"{path}:1:") and rule in p for p in problems), problems


def test_allowed_imports_pass(tmp_path: Path) -> None:
    files = {
        "supervisor/agent.py": "import pkletd.supervisor.pods.book\n",
        "supervisor/pods/book.py": (
            "import pkletd.ipc.runtime.cri\nimport pkletd.supervisor.pods.stage\n"
        ),
        "workers/pleg.py": "import pkletd.ipc.bus.sockets\n",
        "ipc/apimodel/podspec.py": "import pkletd.ipc.apimodel.quantity\n",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert lint_imports.violations(tmp_path) == []


def test_the_tree_obeys_the_rules() -> None:
    assert lint_imports.violations() == []


@pytest.mark.parametrize(
    ("path", "module", "rule"),
    [
        ("workers/podobjects/x.py", "pkletd.workers.statusmanager.jobs", "(statusmanager)"),
        ("workers/pleg.py", "pkletd.workers.prober", "a worker (pleg) imports no other worker"),
        ("workers/http/x.py", "pkletd.workers.nodestats.summary", "(nodestats)"),
        ("workers/lifecycle.py", "pkletd.workers.pleg", "a worker (lifecycle)"),
    ],
)
def test_a_worker_importing_another_worker_is_reported(
    tmp_path: Path, path: str, module: str, rule: str
) -> None:
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text(f"from {module} import x\n")
    problems = lint_imports.violations(tmp_path)
    assert any(p.startswith(f"{path}:1:") and rule in p for p in problems), problems


def test_a_worker_imports_its_own_modules_the_lifecycle_and_the_shared_layer(
    tmp_path: Path,
) -> None:
    files = {
        "workers/pleg/worker.py": (
            "from pkletd.workers.pleg import view\nimport pkletd.workers.lifecycle\n"
            "import pkletd.ipc.bus.sender\n"
        ),
        "workers/prober.py": "from pkletd.workers.lifecycle import serve\n",
        "workers/__init__.py": "",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert lint_imports.violations(tmp_path) == []


def write_tree(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_a_circle_is_reported_with_the_way_round(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "ipc/a.py": "import os\n\nimport pkletd.ipc.b\n",
            "ipc/b.py": "from pkletd.ipc.c import thing\n",
            "ipc/c.py": "try:\n    from pkletd.ipc import a\nexcept ImportError:\n    pass\n",
            "ipc/d.py": "import pkletd.ipc.a\n",  # leads into the circle, not part of it
        },
    )
    assert lint_imports.violations(tmp_path) == [
        "ipc/a.py:3: imports in a circle: "
        "pkletd.ipc.a -> pkletd.ipc.b -> pkletd.ipc.c -> pkletd.ipc.a"
    ]


def test_a_package_and_its_module_in_a_circle_name_the_init(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "workers/pleg/__init__.py": "from pkletd.workers.pleg.worker import Pleg\n",
            "workers/pleg/worker.py": "from pkletd.workers.pleg import OPTIONS\n",
        },
    )
    problems = lint_imports.violations(tmp_path)
    assert problems == [
        "workers/pleg/__init__.py:1: imports in a circle: "
        "pkletd.workers.pleg -> pkletd.workers.pleg.worker -> pkletd.workers.pleg"
    ]


def test_imports_inside_functions_and_of_a_sibling_module_make_no_circle(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "supervisor/a.py": "import pkletd.supervisor.b\n",
            "supervisor/b.py": "def later() -> None:\n    import pkletd.supervisor.a\n",
            "workers/pleg/__init__.py": "from pkletd.workers.pleg.worker import Pleg\n",
            "workers/pleg/worker.py": "from pkletd.workers.pleg import view\n",
            "workers/pleg/view.py": "",
        },
    )
    assert lint_imports.violations(tmp_path) == []
