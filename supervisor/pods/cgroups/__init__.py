"""pkletd.supervisor.pods.cgroups: QoS classes, container resources and pod cgroups."""
