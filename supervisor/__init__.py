"""pkletd.supervisor: the parent process's machinery.

Worker supervision (``children``, ``forkserver``, ``workerset``), the bus and the
control socket (``agent``, ``control``), systemd notification, per-process logs,
the KubeletConfiguration loader and the CLI. The kubelet's pod logic is the
``pods`` package below, which never imports this machinery.
"""
