"""Fuzzed static pod manifests: ``manifests`` mutations of valid pods (``mutate``), put in
the static pod dir ``BATCH`` at a time, each followed until its verdict:

- ``refused``: the supervisor logged ``manifest rejected ... path=<that file>``, and the
  reason names a field of the pod (``FIELD``);
- ``running``: the pod is in ``pkletd status`` with every container running;
- ``not running, said why``: the pod is there, and a container waits with a reason
  (``CrashLoopBackOff``, ``CreateContainerError``...) or has terminated, or the pod
  failed or succeeded (a refused admission is ``Failed`` with its reason);
- ``pending``: the pod is there, still starting (``ContainerCreating``, init
  containers running) ``PENDING_S`` after it appeared: it is being run.

Nothing else may happen: a manifest neither refused nor run within ``VERDICT_S`` is a
failure, as is a refusal that does not name a field, or any worker restart. Then the
batch's files are removed and its pods must be gone within ``GONE_S``.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.node import NODE
from tests.soak.context import Soak, within
from tests.soak.logtail import LogTail
from tests.soak.mutate import mutant
from tests.soak.podmix import fuzz_bases
from tests.soak.report import Row

BATCH = 10
VERDICT_S = 30.0
PENDING_S = 10.0
GONE_S = 60.0
POLL_S = 0.25
FIELD = re.compile(r"\b(metadata|spec|apiVersion|kind)\b")
REJECTED = re.compile(r"manifest rejected source=file path=(\S+) reason=(.*)$", re.MULTILINE)
STARTING = {"ContainerCreating", "PodInitializing", "waiting"}


@dataclass
class Case:
    path: Path
    pod_name: str  # as pkletd status would name it, "" if the mutation made it no name
    mutations: list[str]
    verdict: str = ""
    seen_at: float = 0.0  # when pkletd status first showed its pod


def _expected_name(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{name}-{NODE}" if isinstance(name, str) else ""


def _verdict_of(pod: dict[str, Any]) -> str:
    states = [c["state"] for c in pod["containers"]]
    if pod["phase"] in ("Failed", "Succeeded"):
        return "not running, said why"
    if states and all(s == "running" for s in states):
        return "running"
    if any(s not in STARTING and s != "running" for s in states):
        return "not running, said why"
    return ""


def _judge(cases: list[Case], soak: Soak, log: LogTail, row: Row) -> None:
    rejected = {m[1]: m[2] for m in REJECTED.finditer(log.read())}
    pods = soak.node.pods()
    for case in cases:
        if case.verdict:
            continue
        reason = rejected.get(str(case.path))
        if reason is not None:
            case.verdict = "refused"
            if not row.check("each refusal names the file and a field", bool(FIELD.search(reason))):
                row.note(
                    f"no field named: {case.path.name} ({'; '.join(case.mutations)}): {reason}"
                )
        elif case.pod_name in pods:
            case.verdict = _verdict_of(pods[case.pod_name])
            case.seen_at = case.seen_at or time.monotonic()
            if not case.verdict and time.monotonic() - case.seen_at >= PENDING_S:
                case.verdict = "pending"


def _batch(soak: Soak, start: int, count: int, log: LogTail, row: Row) -> list[Case]:
    bases = fuzz_bases()
    cases = []
    for i in range(start, start + count):
        pod, done = mutant(soak.rng.choice(bases), f"fuzz-{i:04d}", soak.rng)
        path = soak.node.put(f"fuzz-{i:04d}", json.dumps(pod))
        cases.append(Case(path, _expected_name(pod), done))
    deadline = time.monotonic() + VERDICT_S
    while any(not c.verdict for c in cases) and time.monotonic() < deadline:
        _judge(cases, soak, log, row)
        time.sleep(POLL_S)
    for case in cases:
        if not row.check("each runs or is refused", bool(case.verdict)):
            row.note(f"no verdict: {case.path.name} ({'; '.join(case.mutations)})")
    return cases


def _remove(soak: Soak, cases: list[Case]) -> bool:
    for case in cases:
        case.path.unlink()
    names = {c.pod_name for c in cases if c.pod_name}
    return within(lambda: not names & soak.node.pods().keys(), GONE_S)


def run(soak: Soak) -> Row:
    wanted = soak.counts.manifests
    row = Row("fuzzed manifests (mutations of valid pods)")
    parent = soak.node.main_pid
    before = {n: w["restarts"] for n, w in soak.workers().items()}
    log = LogTail(soak.node.log_dir / "supervisor.log")
    verdicts: Counter[str] = Counter()
    done = 0
    while done < wanted and not soak.out_of_time():
        cases = _batch(soak, done, min(BATCH, wanted - done), log, row)
        verdicts.update(c.verdict or "none" for c in cases)
        row.check("every fuzzed pod removed", _remove(soak, cases))
        done += len(cases)
    row.count = f"{done} of {wanted}"
    row.check(f"{wanted} tried", done == wanted)
    row.check(
        "0 crashes",
        soak.node.main_pid == parent
        and {n: w["restarts"] for n, w in soak.workers().items()} == before,
    )
    row.note("verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())))
    return row
