"""pkletd.supervisor.metrics: the numbers the parent keeps for ``/metrics``, and the
``MetricsReport`` it broadcasts for the http worker to serve (``report``)."""
