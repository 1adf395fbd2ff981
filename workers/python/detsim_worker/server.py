# The worker's end of the transport (core/protocol/server.ts + frames.ts): a gRPC server bound to
# one loopback or unix address (any TCP address with mutual TLS and the run's token) whose Session
# streams reassemble chunk+body frames into messages,
# hand them to the runtime one at a time (a process-wide lock: replies in request order) and send
# the replies back as frames. Not the protocol semantics (runtime.py).
from __future__ import annotations

import ipaddress
import os
import re
import socket
import stat
import sys
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import grpc

from ._generated import worker_pb2, worker_pb2_grpc
from .protocol import MAX_CHUNK_BYTES
from .runtime import StreamState, WorkerRuntime
from .scalars import InputError
from .tls import TOKEN_METADATA_KEY, TOKEN_REFUSALS, TlsMaterial, check_bearer

MAX_SOCKET_PATH_BYTES = 100
MAX_ATTACHMENT_BYTES = 2 * 1024 * 1024 * 1024 - 1
LOCAL_LISTEN_RULE = (
    'without TLS a worker listens only on unix:/abs/path or a loopback host (127.0.0.0/8, ::1, '
    'localhost); any other host needs TLS and a bearer token (--tls-dir)'
)
ATTACHMENT_BEFORE_HELLO = 'an attachment chunk before Worker.Hello on this stream'


@dataclass
class ListenAddress:
    kind: str  # 'unix' | 'tcp'
    path: str = ''
    host: str = ''
    port: int = 0


def _q(text: str) -> str:
    from .canonical_json import js_stringify

    return js_stringify(text)


def parse_listen_address(text: str, field: str = 'listen', authenticated: bool = False) -> ListenAddress:
    """unix:/abs/path, a loopback host:port, or (authenticated: TLS + token) any host:port; worded as contract.ts."""
    if text.startswith('unix:'):
        path = text[len('unix:') :]
        if not os.path.isabs(path):
            raise InputError(
                'struct_invalid_field', f'{field}: unix socket path {_q(path)} must be absolute (unix:/abs/path)'
            )
        size = len(path.encode('utf-8'))
        if size >= MAX_SOCKET_PATH_BYTES:
            raise InputError(
                'struct_invalid_field',
                f'{field}: unix socket path is {size} bytes; it must be under {MAX_SOCKET_PATH_BYTES}',
            )
        return ListenAddress('unix', path=path)
    m = re.fullmatch(r'(.+):([0-9]{1,5})', text, re.S)
    if not m or int(m.group(2)) > 65535:
        raise InputError('struct_invalid_field', f'{field}: {_q(text)} is neither unix:/abs/path nor host:port')
    host = m.group(1)
    if not authenticated and not is_loopback_host(host):
        raise InputError('perm_listen_not_local', f'{field}: {_q(host)} is not a loopback address; {LOCAL_LISTEN_RULE}')
    if not authenticated:
        _check_resolves_to_loopback(host, field)
    return ListenAddress('tcp', host=host, port=int(m.group(2)))


def _check_resolves_to_loopback(host: str, field: str) -> None:
    """A host name (localhost) is judged by every address it resolves to, not by its name (as server.ts)."""
    bare = host[1:-1] if host.startswith('[') and host.endswith(']') else host
    try:
        ipaddress.ip_address(bare)
        return  # a literal: checked by is_loopback_host
    except ValueError:
        pass
    try:
        found = [info[4][0] for info in socket.getaddrinfo(bare, None)]
    except OSError:
        found = []
    beyond = next(
        (a for a in found if not ipaddress.ip_address(a.split('%')[0]).is_loopback and not _mapped_loopback(a)), None
    )
    if found and beyond is None:
        return
    what = f'resolves to {beyond}, which is not a loopback address' if beyond else 'resolves to no address'
    raise InputError('perm_listen_not_local', f'{field}: {_q(host)} {what}; {LOCAL_LISTEN_RULE}')


def _mapped_loopback(a: str) -> bool:
    ip = ipaddress.ip_address(a.split('%')[0])
    return isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback


def is_loopback_host(host: str) -> bool:
    if host in ('localhost', '::1', '[::1]'):
        return True
    m = re.fullmatch(r'127\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})', host)
    return m is not None and all(int(o) <= 255 for o in m.groups())


def remove_stale_socket(path: str) -> None:
    try:
        if stat.S_ISSOCK(os.stat(path).st_mode):
            os.remove(path)
    except FileNotFoundError:
        pass


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
