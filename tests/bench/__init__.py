"""pkletd benchmarks, each figure beside a baseline measured in the same run.

Run from the repository root (``make bench``)::

    .venv/bin/python -m tests.bench [--pods N] [--rounds R] [--kills K] [--http-kills K]
        [--poll-ms MS] [--mix-pods N] [--mix-rounds R] [--probe-pods N] [--probe-window S]
        [--api-pods N] [--api-requests N] [--exec-runs N] [--pleg-pods N] [--pleg-exits N]
        [--pleg-batch N] [--pleg-spread S] [--pleg-window S] [--pleg-poll-ms MS]
        [--csi-pods N] [--csi-rounds R] [--scale-sizes N [N ...]] [--scale-window S]
        [--scale-requests N] [--scale-status-runs N] [--containerd-dir D] [--only FIGURE]
        [--keep]

It starts a private containerd of its own under ``--containerd-dir``
(``/tmp/pkletd-ctr-bench``; give another dir while anything else may use that
one: a shared containerd skews every figure), stopped at the end, also on
failure, prints one human-readable line per figure, and as the last line of
stdout one JSON object with every figure (flat keys, seconds and MB) and
``targets_met``, for scripts. Progress goes to stderr. The exit
status is non-zero only when the bench itself fails (e.g. pkletd started a pod
twice), not when a target is missed: misses are flagged in the output.

Figures, one module each (their docstrings say how each is measured):

1. ``startup``: pod start-up, pkletd against the raw CRI floor (``floor``).
2. ``restarts``: worker restart after SIGKILL, against a cold import.
3. ``status``: ``pkletd status`` wall time, against ``python -c pass``.
4. ``memory``: PSS of pkletd's processes, against one python with its imports.
5. ``podmix``: start-up of pods with init containers, against the CRI floor.
6. ``proberload``: the prober's CPU, lateness and kept periods under 110 pods'
   probes (``probestats``, ``proberwhy``), against a minimal probe loop.
7. ``cluster``: API requests per pod and per minute, and start-up through the
   test API server, against the kubelet's.
8. ``kubeletapi``: ``/pods``, ``/stats/summary`` and ``/metrics/cadvisor`` latency
   with 110 pods, against ``/healthz`` and the floor of each one's data
   (``statsfloor``), and the http worker's PSS.
9. ``exec``: the ``kubectl exec`` round trip, against a bare CRI ``ExecSync``
   (``kubectlexec``).
10. ``pleg`` (``plegevents``): a container's exit to the pod's status (``pkletd status``
    and ``/pods``) on containerd's event stream, against the same exits under 1 s
    relisting, and the pleg worker's steady CPU with 110 pods both ways.
11. ``storage``: pod start-up through the API with one CSI volume each (the test
    driver, staged and published), against the same pods without one plus the driver's
    NodeStageVolume + NodePublishVolume made bare (``csifloor``); API requests per pod
    with a claim against without.
12. ``scale`` (``--only scale`` only, not in a full run): at 50, 110 and 250 pods
    (``maxPods`` the size), start-up against the floor, ``pkletd status`` against
    ``python -c pass``, ``/pods`` and ``/stats/summary`` against ``/healthz``, PSS, each
    process's steady CPU; and the cost per 100 pods of each, between sizes.

Figures 2-4 use the pods of figure 1's last pkletd run; 5 to 12 start from an
empty runtime with pkletd instances of their own (``--only`` runs one of them;
``--only restarts`` runs figure 2 alone, on a pkletd with no pod).
``common`` holds what they share (CPU accounting, the bench's pkletd, cleanup,
the bytecode cache).

Targets: start-up totals (plain and pod mix) within 1.3x the floor, restart
medians under 0.1 s (the http worker's 25 ms, with no healthz request refused),
status under 100 ms, PSS under 200 MB, prober under 15% of one core with p99
lateness under 100 ms and every period kept. The whole run takes about 9-11 minutes
on a 2-core machine (figure 2's 20 http kills about 4 of them), figures 8 and 9
about 4 more, figure 10 about 5 and figure 11 about 3.
Everything is stopped and cleaned at the end: pkletd, all pods, the bench
containerd.
"""
