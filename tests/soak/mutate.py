"""Mutations of a valid pod, for the manifest fuzzer: one to three at random places.

A place is any node of the pod's JSON tree (a map, a list or a value, at any depth).
Operations: remove it; put a value of another type or an odd value of the same type in
its place; add an unknown field beside it; repeat a list's item (two containers of one
name, two volumes...). The result is always written as JSON, so what the file source
sees is syntactically valid and wrong only in its content.

``terminationGracePeriodSeconds`` is held to at most ``MAX_GRACE_S`` after mutating, so
a removed pod is gone within the run's deadlines whatever its containers ignore.
"""

from __future__ import annotations

import copy
from random import Random
from typing import Any

MAX_GRACE_S = 2
Place = tuple[Any, ...]  # keys and indexes from the root
ODD = (
    None, True, False, 0, -1, 2**40, 2**63, 1.5, -0.0, "", "x" * 300, "Bad Name", "UPPER",
    "-leading", "a/b", "é漢🙂", "1e3", "-5", "${BAD}", "100Gi", "0.001m", [], {}, ["a"],
    {"a": 1}, [{}], [None], {"": ""},
)  # fmt: skip


def places(tree: Any, at: Place = ()) -> list[Place]:
    """Every node's place, the root's excepted."""
    found: list[Place] = [at] if at else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += places(value, (*at, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            found += places(value, (*at, index))
    return found


def _parent(tree: Any, place: Place) -> Any:
    for step in place[:-1]:
        tree = tree[step]
    return tree


def _odd_like(value: Any, rng: Random) -> Any:
    if isinstance(value, bool) or rng.random() < 0.6:
        return rng.choice(ODD)
    if isinstance(value, int):
        return rng.choice([-value - 1, value * 1000 + 7, 0, -(2**31)])
    if isinstance(value, str):
        return rng.choice([value.upper(), value + "!", value * 50, value[:1], " " + value])
    return rng.choice(ODD)


def mutate_once(pod: dict[str, Any], rng: Random) -> str:
    """Mutate ``pod`` in place; what was done, e.g. ``spec.containers[0].image: removed``."""
    place = rng.choice(places(pod))
    parent, last = _parent(pod, place), place[-1]
    what = rng.randrange(4)
    if what == 0:
        del parent[last]
        done = "removed"
    elif what == 1:
        parent[last] = _odd_like(parent[last], rng)
        done = f"set to {parent[last]!r:.40}"
    elif what == 2 and isinstance(parent, dict):
        parent[rng.choice(["fuzzExtra", "Name", "containers", "spec"])] = rng.choice(ODD)
        done = "an unknown field beside it"
    elif isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))
        done = "repeated"
    else:
        parent[last] = _odd_like(parent[last], rng)
        done = f"set to {parent[last]!r:.40}"
    return f"{dotted(place)}: {done}"


def dotted(place: Place) -> str:
    text = ""
    for step in place:
        text += f"[{step}]" if isinstance(step, int) else f".{step}"
    return text.lstrip(".")


def mutant(base: dict[str, Any], name: str, rng: Random) -> tuple[dict[str, Any], list[str]]:
    """A mutated copy of ``base`` named ``name`` (unless a mutation renamed it), and what
    was done to it."""
    pod = copy.deepcopy(base)
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"] = {"test": name}
    done = [mutate_once(pod, rng) for _ in range(rng.randint(1, 3))]
    spec = pod.get("spec")
    grace = spec.get("terminationGracePeriodSeconds") if isinstance(spec, dict) else None
    if isinstance(grace, int) and not isinstance(grace, bool) and grace > MAX_GRACE_S:
        spec["terminationGracePeriodSeconds"] = MAX_GRACE_S
    return pod, done
