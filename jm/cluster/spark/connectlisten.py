"""The Spark Connect endpoint's listening side (spark.connect.endpoint.port): its gRPC
server, bound when the peer starts (a taken port is a configuration error naming the key,
a range takes the first free port), with one generic handler per method of Spark's
SparkConnectService that hands each call to the ConnectFront (jm/cluster/spark/
connectfront.py) once the peer has one."""
from __future__ import annotations

import functools
import logging
import socket
from typing import TYPE_CHECKING, Any, Optional

import grpc

from jm.config import ConfigError
from jm.policy.spark.connectwire import METHODS

if TYPE_CHECKING:
    from jm.cluster.spark.connectfront import ConnectFront

log = logging.getLogger("jm.connect")

MAX_MESSAGE = 128 * 1024 * 1024  # bytes of one gRPC message (Spark's own limit)


class Listener:
    """The endpoint's gRPC server, bound at the peer's start (a taken port is a
    configuration error, naming the key) and serving once `serve` is called."""

    def __init__(self, host: str, ports: tuple[int, int],
                 tls: Optional[tuple[bytes, bytes]]) -> None:
        self.front: Optional["ConnectFront"] = None
        self.server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.so_reuseport", 0)])  # (else a second peer binds the same port)
        self.server.add_generic_rpc_handlers((_Handlers(self),))
        creds = grpc.ssl_server_credentials([(tls[1], tls[0])]) if tls is not None else None
        self.port = 0
        for port in range(ports[0], ports[1] + 1):  # the first free one
            address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            if port and not _free(host, port):  # (gRPC would log its own error first)
                continue
            try:
                self.port = (self.server.add_secure_port(address, creds) if creds
                             else self.server.add_insecure_port(address))
            except RuntimeError:
                continue
            if self.port:
                break
        if not self.port:
            shown = ports[0] if ports[0] == ports[1] else f"{ports[0]}-{ports[1]}"
            raise ConfigError(f"spark.connect.endpoint.port: cannot listen on {host}:{shown}"
                              " (taken? 0 picks a free port; a range such as 15002-15010 "
                              "the first free one)")

    async def serve(self, front: "ConnectFront") -> None:
        self.front = front
        await self.server.start()

    async def close(self) -> None:
        try:
            await self.server.stop(grace=1.0)
        except Exception:  # (never started: the peer stopped while it joined)
            log.debug("stopping the Connect endpoint", exc_info=True)


def _free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def open_endpoint(conf: Any, host: str) -> Optional[Listener]:
    """The endpoint's listener, bound (None: spark.connect.endpoint.enabled is false, or
    the peer has no Spark); TLS with REST's certificate where REST has it."""
    if not conf.spark.serves_connect:
        return None
    tls = None
    if conf["rest.ssl.enabled"]:
        try:
            with open(conf.path("rest.ssl.certificate"), "rb") as f:
                cert = f.read()
            with open(conf.path("rest.ssl.key"), "rb") as f:
                key = f.read()
        except OSError as exc:
            raise ConfigError(f"rest.ssl.certificate / rest.ssl.key (for the Spark Connect "
                              f"endpoint): {exc}") from None
        tls = (cert, key)
    return Listener(conf["rest.bind-address"] or host, conf["spark.connect.endpoint.port"],
                    tls)


class _Handlers(grpc.GenericRpcHandler):
    def __init__(self, listener: Listener) -> None:
        self.listener = listener

    def service(self, details: grpc.HandlerCallDetails):
        name = details.method.rpartition("/")[2]
        method = METHODS.get(name)
        if method is None or details.method != method.path:
            return None  # UNIMPLEMENTED
        front = self.listener.front
        if front is None:
            return None
        # (coroutine and async generator functions, as grpc.aio tells them apart: a
        # plain function would be run in a thread)
        if method.client_streaming:
            return grpc.stream_unary_rpc_method_handler(
                functools.partial(front.client_stream, method))
        if method.server_streaming:
            return grpc.unary_stream_rpc_method_handler(
                functools.partial(front.server_stream, method))
        return grpc.unary_unary_rpc_method_handler(functools.partial(front.unary, method))
