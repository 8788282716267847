"""The kubelet's pod-resources gRPC API, ``v1.PodResourcesLister``, on a unix socket.

As a kubelet without device plugins, CPU manager, memory manager or DRA answers:

- ``List``: the active pods (not Succeeded or Failed), each with its sidecars (init
  containers with ``restartPolicy: Always``) and its containers, in spec order, with no
  devices, CPU ids, memory or dynamic resources;
- ``GetAllocatableResources``: nothing allocatable;
- ``Get``: one pod by namespace and name, any phase; an unknown one fails with the
  kubelet's message ``pod <name> in namespace <namespace> not found``, as NOT_FOUND (the
  kubelet returns a plain error, which gRPC gives as UNKNOWN).

The only module that imports the generated ``podresources_pb2`` (from
``proto/podresources/v1/api.proto``; ``make proto`` regenerates it). The handlers are
registered by hand from the descriptor, so no generated ``_grpc`` module is needed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from pkletd.ipc.apimodel.podenums import TERMINAL_PHASES, RestartPolicy
from pkletd.workers.podresources import podresources_pb2 as pb

log = logging.getLogger(__name__)

SERVICE = pb.DESCRIPTOR.services_by_name["PodResourcesLister"].full_name  # v1.PodResourcesLister
PodDict = Mapping[str, Any]  # an API pod, with its status
PodsProvider = Callable[[], Iterable[PodDict]]


def pod_resources(pod: PodDict) -> Any:
    """A pod as ``PodResources``: its sidecars, then its containers."""
    spec = pod.get("spec", {})
    sidecars = [
        c
        for c in spec.get("initContainers") or ()
        if c.get("restartPolicy") == RestartPolicy.ALWAYS
    ]
    containers = [*sidecars, *(spec.get("containers") or ())]
    return pb.PodResources(
        name=pod["metadata"]["name"],
        namespace=pod["metadata"].get("namespace", "default"),
        containers=[pb.ContainerResources(name=c["name"]) for c in containers],
    )


def _active(pod: PodDict) -> bool:
    return pod.get("status", {}).get("phase") not in TERMINAL_PHASES


class PodResourcesServicer:
    """The three methods, over the pods ``pods`` gives at each call."""

    def __init__(self, pods: PodsProvider) -> None:
        self._pods = pods

    def list(self, request: Any, context: grpc.ServicerContext) -> Any:
        found = [pod_resources(p) for p in self._pods() if _active(p)]
        return pb.ListPodResourcesResponse(pod_resources=found)

    def get_allocatable_resources(self, request: Any, context: grpc.ServicerContext) -> Any:
        return pb.AllocatableResourcesResponse()

    def get(self, request: Any, context: grpc.ServicerContext) -> Any:
        for pod in self._pods():
            meta: Mapping[str, Any] = pod["metadata"]
            if (meta["name"], meta.get("namespace", "default")) == (
                request.pod_name,
                request.pod_namespace,
            ):
                return pb.GetPodResourcesResponse(pod_resources=pod_resources(pod))
        context.abort(
            grpc.StatusCode.NOT_FOUND,
            f"pod {request.pod_name} in namespace {request.pod_namespace} not found",
        )

    def handler(self) -> grpc.GenericRpcHandler:
        def unary(method: Callable[[Any, grpc.ServicerContext], Any], name: str) -> Any:
            rpc = pb.DESCRIPTOR.services_by_name["PodResourcesLister"].methods_by_name[name]
            request = getattr(pb, rpc.input_type.name)
            response = getattr(pb, rpc.output_type.name)
            return grpc.unary_unary_rpc_method_handler(
                method,
                request_deserializer=request.FromString,
                response_serializer=response.SerializeToString,
            )

        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "List": unary(self.list, "List"),
                "GetAllocatableResources": unary(
                    self.get_allocatable_resources, "GetAllocatableResources"
                ),
                "Get": unary(self.get, "Get"),
            },
        )


def serve(socket_path: Path | str, pods_provider: PodsProvider, workers: int = 4) -> grpc.Server:
    """Serve on the unix socket (made afresh; its directory made 0750 if missing) and
    return the started server; ``server.stop(grace)`` ends it."""
    path = Path(socket_path)
    path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    try:
        path.unlink()  # a socket left by an earlier run
    except FileNotFoundError:
        pass
    server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="podres"))
    server.add_generic_rpc_handlers((PodResourcesServicer(pods_provider).handler(),))
    if server.add_insecure_port(f"unix://{path}") == 0:
        raise OSError(f"pod-resources: cannot listen on {path}")
    server.start()
    os.chmod(path, 0o660)
    log.info("serving pod resources socket=%s", path)
    return server
