"""pkletd's soak: a node under faults, and what must hold through each of them.

Run from the repository root (``make soak``, ``make soak SOAK_ARGS=--short``)::

    .venv/bin/python -m tests.soak [--short | --scale F] [--pods N] [--seed S]
        [--time-limit SECONDS] [--only FAULT,...] [--containerd-dir D] [--markdown FILE]
        [--keep]

The full form makes every fault of issue 13's table at its count (``plan.FULL``: 200
worker kills, 20 supervisor kills, 5 containerd restarts, 10 000 fuzzed bus messages,
10 000 fuzzed HTTP requests, 1 000 fuzzed manifests...) under 90 running pods;
``--short`` a tenth of each, under 20 pods, in about three minutes (``make test`` runs it:
``test_soak.py``); ``--scale F`` any other fraction. The faults come from one seeded
random generator (``--seed``, 1 by default), so a run can be made again.

What runs (``run``): a private containerd of the soak's own (``--containerd-dir``,
``/tmp/pkletd-ctr-soak``; never share one: the soak restarts it), the test API server
(``tests.harness.apiserver``), and one pkletd joined to it (``node``) as its systemd
unit runs it (``service``: notify socket, READY=1, the watchdog, RestartSec), with its
root, log and pod log dirs on a tmpfs of their own. Its pods (``podmix``): static pods
and API pods with exec, HTTP and TCP probes, init containers and a ConfigMap, two kinds
restarting on purpose. Every connection is to 127.0.0.1 or to pod addresses of the
soak's containerd.

The faults, one module each, in this order (``run.FAULTS``; ``--only`` picks some):

- ``kills``: SIGKILL of random workers; SIGKILL of the supervisor, restarted as systemd
  would; SIGSTOP of random workers past their heartbeat deadline;
- ``runtime``: containerd restarted (pkletd healthy again within 5 s);
- ``bussocket``: the bus sockets removed or replaced, garbage bytes and frames on them;
- ``busfuzz``: fuzzed messages from a rogue bus peer;
- ``httpfuzz``: fuzzed HTTP to the healthz, read-only and kubelet API ports;
- ``manifests``: mutated static pod manifests (``mutate``);
- ``diskfull``: the log and root dirs' filesystem full, then free again.

After each fault, whatever it checked itself (its module's docstring says what), the
same must-holds (``context.Soak.settle``): every worker running; no container restarted
and no sandbox recreated in the pods that are not meant to restart, by the runtime's own
container IDs and pkletd's restart counts; and every pod's status agreeing, in pkletd,
in the API server and in the kubelet API's ``/pods``, with what the runtime runs
(``observe``): a lost status update is a difference that does not go away. The last row
checks the whole run: no restart caused first to last, and the watchdog never silent
for WatchdogSec.

Bounds: every wait has a deadline; each fault stops making faults once ``--time-limit``
is spent (the form's default: 300 s plus 7 200 s times its fraction), and a timer stops
the run ``run.HARD_GRACE_S`` later wherever it is. Everything is stopped and removed at
the end, also on failure: pkletd, the pods, the API server, the tmpfs, the containerd.

Output: progress on stderr, the table (fault, count, what held, measured) on stdout, a
verdict line; exit status 1 if any must-hold failed. ``docs/soak.md`` keeps a full run's
table.
"""
