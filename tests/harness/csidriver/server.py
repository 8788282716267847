"""The driver process: the CSI socket (Identity and Node) and, once it is up, the
registration socket (``pluginregistration.Registration``) as node-driver-registrar
serves it: GetInfo says ``CSIPlugin``, the driver's name, its CSI socket and versions
``["1.0.0"]``; NotifyRegistrationStatus is recorded. Each socket is made afresh (one left
by a killed run is replaced). SIGTERM or SIGINT: the registration socket goes first (the
kubelet deregisters the driver), then the CSI socket, and the process exits 0.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
from pkletd.ipc.csi import csi_pb2, pluginregistration_pb2

from tests.harness.csidriver.calls import CallLog
from tests.harness.csidriver.config import VERSION, DriverConfig, parse
from tests.harness.csidriver.hostpath import HostPath, Refused

log = logging.getLogger("csidriver")
READY = "ready"  # the line on stdout once both sockets serve

Answer = Callable[[Any], Any]


def _handlers(
    module: ModuleType, answers: dict[str, Answer], calls: CallLog
) -> list[grpc.GenericRpcHandler]:
    """Every service of ``module`` with the methods ``answers`` has, each call recorded."""

    def recorded(method: str, answer: Answer) -> Any:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                reply = answer(request)
            except Refused as exc:
                calls.record(method, request, exc.code.name, exc.detail)
                context.abort(exc.code, exc.detail)
            except OSError as exc:
                calls.record(method, request, "INTERNAL", str(exc))
                context.abort(grpc.StatusCode.INTERNAL, str(exc))
            calls.record(method, request, "OK")
            return reply

        return handle

    found = []
    for service in module.DESCRIPTOR.services_by_name.values():
        methods = {
            rpc.name: grpc.unary_unary_rpc_method_handler(
                recorded(rpc.name, answers[rpc.name]),
                request_deserializer=getattr(module, rpc.input_type.name).FromString,
                response_serializer=getattr(module, rpc.output_type.name).SerializeToString,
            )
            for rpc in service.methods
        }
        found.append(grpc.method_handlers_generic_handler(service.full_name, methods))
    return found


def _serve(path: Path, handlers: list[grpc.GenericRpcHandler]) -> grpc.Server:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # left by a killed run
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(handlers)
    if server.add_insecure_port(f"unix://{path}") == 0:
        raise OSError(f"cannot listen on {path}")
    server.start()
    return server


def registration_answers(config: DriverConfig) -> dict[str, Answer]:
    pb = pluginregistration_pb2
    info = pb.PluginInfo(
        type="CSIPlugin",
        name=config.name,
        endpoint=str(config.endpoint),
        supported_versions=[VERSION],
    )
    return {
        "GetInfo": lambda request: info,
        "NotifyRegistrationStatus": lambda request: pb.RegistrationStatusResponse(),
    }


def _stop(server: grpc.Server, path: Path) -> None:
    server.stop(1).wait()
    path.unlink(missing_ok=True)


def run(config: DriverConfig) -> int:
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    calls = CallLog(config.calls)
    driver = HostPath(config)
    answers = {
        rpc.name: getattr(driver, rpc.name)
        for s in csi_pb2.DESCRIPTOR.services_by_name.values()
        for rpc in s.methods
    }
    csi = _serve(config.endpoint, _handlers(csi_pb2, answers, calls))
    registration = _serve(
        config.registration_socket,
        _handlers(pluginregistration_pb2, registration_answers(config), calls),
    )
    log.info("serving driver=%s endpoint=%s", config.name, config.endpoint)
    print(READY, flush=True)
    stopping.wait()
    log.info("stopping driver=%s", config.name)
    _stop(registration, config.registration_socket)
    _stop(csi, config.endpoint)
    return 0


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s csidriver[%(process)d] %(levelname)s %(message)s"
    )
    return run(parse(sys.argv[1:]))
