"""pkletd.supervisor.pods: the kubelet's pod logic, run in the parent.

The pod book and its state machine, the syncLoop, pod workers, the pod syncer and
what it computes and reads (actions, inspector, status), admission, killing,
CrashLoopBackOff, image pulls, probe results and events. ``setup`` prepares what a
container needs (volumes, env, security context, the CRI spec); ``cgroups`` holds
QoS, resources and the pod cgroups. Nothing here imports the process machinery.
"""
