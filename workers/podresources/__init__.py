"""pkletd: pod-resources -- the kubelet's pod-resources gRPC API (``v1.PodResourcesLister``)
on ``<root-dir>/pod-resources/kubelet.sock``, for device monitoring agents.

Modules: ``worker`` (the process: the node's pods as the parent says them),
``servicer`` (the three methods and the server), ``podresources_pb2`` (generated from
``proto/podresources/v1/api.proto`` by ``make proto``).
"""

from pkletd.workers.podresources.worker import SOCKET, main

__all__ = ["SOCKET", "main"]
