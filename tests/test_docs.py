"""The docs a newcomer reads hold together: every link lands, every path named is there.

- every relative link in README.md and docs/**/*.md points at a file of the repository,
  and a ``#anchor`` at a heading of that file (GitHub's slugs);
- every page under docs/ is linked from README.md or from a page it links to;
- every repository path named in backticks (``supervisor/pods/podsync.py``,
  ``workers/pleg/``) exists;
- README.md stays a way in: under 250 lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
README_MAX_LINES = 250

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
# A repository path: a top-level folder of the tree, then path characters only (no
# placeholders such as <folder>, no globs, no spaces).
REPO_PATH = re.compile(r"(?:supervisor|workers|ipc|proto|etc|tests|docs)/[\w./-]*")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (their text is not links or names)."""
    return FENCE.sub("", page.read_text())


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(_prose(page)):
        base = slug(heading)
        name, n = base, 0
        while name in found:  # GitHub numbers repeated headings: x, x-1, x-2
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(_prose(page))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def broken_link(page: Path, target: str) -> str | None:
    """Why ``target``, linked from ``page``, does not land; None when it does."""
    path_part, _, anchor = target.partition("#")
    linked = (page.parent / path_part).resolve() if path_part else page
    if not linked.exists():
        return f"{_name(page)}: link to a missing file: {target}"
    if anchor and anchor not in anchors(linked):
        return f"{_name(page)}: link to a missing heading: {target}"
    return None


def named_paths(page: Path) -> list[str]:
    return [code for code in CODE.findall(_prose(page)) if REPO_PATH.fullmatch(code)]


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_link_lands(page: Path) -> None:
    problems = [broken_link(page, target) for target in links(page)]
    assert [p for p in problems if p] == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_path_named_exists(page: Path) -> None:
    missing = [path for path in named_paths(page) if not (ROOT / path).exists()]
    assert missing == [], f"{_name(page)} names paths not in the tree: {', '.join(missing)}"


def test_every_page_is_reachable_from_the_readme() -> None:
    seen: set[Path] = set()
    todo = [README]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.is_file():
            continue
        seen.add(page)
        for target in links(page):
            path_part = target.partition("#")[0]
            if path_part:
                todo.append((page.parent / path_part).resolve())
    assert [_name(p) for p in PAGES if p not in seen] == []


def test_the_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines"


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Installing on a node", "installing-on-a-node"),
        ("In `pkletd status`", "in-pkletd-status"),
        ("Objects pods use, the parent's side", "objects-pods-use-the-parents-side"),
        ("Pods in: `pkletd: api-watcher`", "pods-in-pkletd-api-watcher"),
    ],
)
def test_slugs_are_githubs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_broken_link_and_a_missing_path_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading\n")
    page.write_text(
        "[ok](there.md#a-heading) [gone](nowhere.md) [bad](there.md#no-such)\n"
        "`workers/no_such_worker.py` `tests/<folder>/x.py` `/var/lib/kubelet`\n"
        "```\n[in code](nowhere-either.md)\n```\n"
    )
    problems = [broken_link(page, target) for target in links(page)]
    assert [p for p in problems if p] == [
        f"{page}: link to a missing file: nowhere.md",
        f"{page}: link to a missing heading: there.md#no-such",
    ]
    assert named_paths(page) == ["workers/no_such_worker.py"]
