"""The import linter finds each crossing of a subsystem boundary."""

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
