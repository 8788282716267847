"""The read-only node data behind metrics-server, Prometheus and eviction: pure
functions the http worker mounts as routes, and the readers the eviction and image-gc
workers measure the node with.

- ``summary``: ``SummaryProvider.summary(pods, only_cpu_and_memory)``, ``/stats/summary``;
- ``resource``: ``resource_metrics(provider, pods)``, ``/metrics/resource``;
- ``cadvisor``: ``cadvisor_metrics(source, pods)``, ``/metrics/cadvisor``.

Underneath: ``cgroupstats`` (a cgroup's counters, v1 and v2), ``rates`` (usageNanoCores
from two samples), ``podrefs`` (pod dicts to cgroups), ``procfs`` (node facts from
``/proc``), ``fsusage`` (statvfs and du). ``pods`` are the API pod dicts with status, as
the http worker holds them.
"""
