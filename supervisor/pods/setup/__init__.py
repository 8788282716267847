"""pkletd.supervisor.pods.setup: what the kubelet does around the CRI calls.

Volumes (and their atomic writer and mounts), the environment (with the downward
API), the security context, and the CRI sandbox and container specs with the
kubelet's labels, annotations and log paths.
"""
