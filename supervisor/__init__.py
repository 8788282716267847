"""pkletd.supervisor: the parent process's machinery.

Its parts built from the configuration (``parts``) and run by one loop (``agent``);
worker supervision (``children``, ``forkserver``, the table of workers ``workerset``
with ``workeroptions``), the workers' messages routed by one table (``routing``,
``messagehandlers``), the control socket (``control``), systemd notification,
per-process logs, the KubeletConfiguration loader and the CLI. The kubelet's pod logic
is the ``pods`` package below, which never imports this machinery.
"""
