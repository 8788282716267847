"""The read-only node data behind metrics-server, Prometheus and eviction: what the http
worker's housekeeping gathers and renders, and the readers the eviction and image-gc
workers measure the node with.

- ``housekeeping``: ``Housekeeping.gather(pods)``, one pass over every figure below;
- ``summary``: ``SummaryProvider.raw_summary(pods, only_cpu_and_memory)``, the Summary
  of ``/stats/summary``; ``cpu_and_memory`` cuts a full one; ``format_times``;
- ``resource``: ``resource_metrics(summary)``, ``/metrics/resource``;
- ``cadvisor``: ``CadvisorSource.rows(pods)``, ``cadvisor_metrics(rows, machine)``,
  ``/metrics/cadvisor``.

Underneath: ``cgroupstats`` (a cgroup's counters, v1 and v2), ``rates`` (usageNanoCores
from two samples), ``podrefs`` (pod dicts to cgroups), ``procfs`` (node facts from
``/proc``), ``fsusage`` (statvfs and du), ``treecache`` (du at most once a period).
``pods`` are the API pod dicts with status, as the http worker holds them.
"""
