# The worker's end of the transport (core/protocol/server.ts + frames.ts): a gRPC server bound to
# one loopback or unix address (any TCP address with mutual TLS and the run's token) whose Session
# streams reassemble chunk+body frames into messages,
# hand them to the runtime one at a time (a process-wide lock: replies in request order) and send
# the replies back as frames. Not the protocol semantics (runtime.py).
from __future__ import annotations

import sys
import threading
from typing import Callable, Iterator

import grpc

from ._generated import worker_pb2, worker_pb2_grpc
from .listen import (  # noqa: F401 (re-exported: the names importers of server.py use)
    ATTACHMENT_BEFORE_HELLO,
    LOCAL_LISTEN_RULE,
    MAX_ATTACHMENT_BYTES,
    MAX_SOCKET_PATH_BYTES,
    ListenAddress,
    is_loopback_host,
    parse_listen_address,
    remove_stale_socket,
)
from .protocol import MAX_CHUNK_BYTES
from .runtime import StreamState, WorkerRuntime
from .tls import TOKEN_METADATA_KEY, TOKEN_REFUSALS, TlsMaterial, check_bearer


class FrameError(Exception):
    pass


class _Assembler:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0

    def push(self, frame: worker_pb2.Frame) -> tuple[bytes, bytes | None] | None:
        body, chunk = frame.body, frame.chunk
        if body and chunk:
            raise FrameError('a frame carries both body and chunk')
        if chunk:
            if len(chunk) > MAX_CHUNK_BYTES:
                raise FrameError(f'a chunk of {len(chunk)} bytes exceeds {MAX_CHUNK_BYTES}')
            self.size += len(chunk)
            if self.size > MAX_ATTACHMENT_BYTES:
                raise FrameError(f'attachment exceeds {MAX_ATTACHMENT_BYTES} bytes')
            self.chunks.append(chunk)
            return None
        if not body:
            raise FrameError('an empty frame (neither body nor chunk)')
        attachment = b''.join(self.chunks) if self.chunks else None
        self.chunks, self.size = [], 0
        return body, attachment


def encode_frames(body: bytes, attachment: bytes | None) -> Iterator[worker_pb2.Frame]:
    if attachment:
        view = memoryview(attachment)
        for off in range(0, len(attachment), MAX_CHUNK_BYTES):
            yield worker_pb2.Frame(chunk=bytes(view[off : off + MAX_CHUNK_BYTES]))
    yield worker_pb2.Frame(body=body)


class WorkerService(worker_pb2_grpc.WorkerServicer):
    def __init__(self, runtime: WorkerRuntime, on_stop: Callable[[], None], token: str | None = None) -> None:
        self.runtime = runtime
        self.on_stop = on_stop
        self.token = token  # a TLS worker's run token or a plaintext TCP worker's secret: every stream must carry it
        self.lock = threading.Lock()  # one request at a time across every stream, as the TS worker

    def Session(self, request_iterator, context):  # noqa: N802 (the gRPC method name)
        if self.token is not None:
            self._refuse_unauthorized(context)
        stream = StreamState()
        assembler = _Assembler()
        for frame in request_iterator:
            try:
                if frame.chunk and not stream.introduced:
                    raise FrameError(ATTACHMENT_BEFORE_HELLO)
                message = assembler.push(frame)
            except FrameError as e:
                sys.stderr.write(f'detsim worker {self.runtime.worker_id}: framing error, stream ended: {e}\n')
                return
            if message is None:
                continue
            with self.lock:
                out = self.runtime.handle(message[0], message[1], stream)
            yield from encode_frames(out.body, out.attachment)
            if out.stop:
                self.on_stop()

    def _refuse_unauthorized(self, context) -> None:
        """End a stream without the run's token with UNAUTHENTICATED before reading a frame (server.ts "
        "refuseUnauthorized)."""
        presented = next((value for key, value in context.invocation_metadata() if key == TOKEN_METADATA_KEY), None)
        refusal = check_bearer(self.token, presented)
        if refusal is not None:
            sys.stderr.write(f'detsim worker {self.runtime.worker_id}: [{refusal}] refused {TOKEN_REFUSALS[refusal]}\n')
            context.abort(grpc.StatusCode.UNAUTHENTICATED, f'[{refusal}] {TOKEN_REFUSALS[refusal]}')


def start_server(
    listen: str,
    runtime: WorkerRuntime,
    on_stop: Callable[[], None],
    tls: TlsMaterial | None = None,
    plain_token: str | None = None,
) -> tuple[grpc.Server, str]:
    """Bind and start; with `tls`, mutual TLS (a client certificate of tls.ca required) and the token on every
    stream; with `plain_token` (a plaintext TCP worker's per-run secret), that token on every stream."""
    address = parse_listen_address(listen, '--listen', tls is not None)
    options = [
        ('grpc.max_receive_message_length', runtime.max_message_bytes),
        ('grpc.max_send_message_length', runtime.max_message_bytes),
        ('grpc.so_reuseport', 0),
    ]
    # Enough threads for the coordinator's stream plus strangers; the lock serializes the work.
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(max_workers=8), options=options)
    token = tls.token if tls else plain_token
    worker_pb2_grpc.add_WorkerServicer_to_server(WorkerService(runtime, on_stop, token), server)
    if address.kind == 'unix':
        remove_stale_socket(address.path)
        target = f'unix:{address.path}'
        server.add_insecure_port(target)
        bound = target
    else:
        host = (
            address.host
            if not address.host.startswith('[') and ':' not in address.host
            else f'[{address.host.strip("[]")}]'
        )
        port = (
            server.add_secure_port(
                f'{host}:{address.port}',
                grpc.ssl_server_credentials([(tls.key, tls.cert)], root_certificates=tls.ca, require_client_auth=True),
            )
            if tls
            else server.add_insecure_port(f'{host}:{address.port}')
        )
        if port == 0:
            raise OSError(f'cannot bind {address.host}:{address.port}')
        bound = f'{address.host}:{port}'
    server.start()
    return server, bound
