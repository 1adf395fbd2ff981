# The worker's end of the socket wire (core/protocol/socket-wire.ts + socket-server.ts): a Unix
# socket server for a worker `detsim run` starts itself (`--wire socket`). A message is an 8-byte
# header (the body's length and the attachment's, unsigned 32-bit big-endian), the body, the
# attachment. Each connection is a stream (Hello first, per connection); requests are handled one at
# a time across connections (a process-wide lock: replies in request order), as server.py does for
# gRPC. A header past the limits, or announcing an attachment before the connection's Hello, ends the
# connection before anything it announces is read. Not the protocol semantics (runtime.py).
from __future__ import annotations

import socket
import struct
import sys
import threading
from typing import Callable

from .listen import MAX_ATTACHMENT_BYTES, remove_stale_socket
from .runtime import StreamState, WorkerRuntime

# Why a connection is ended when its header announces an attachment before that connection's Hello
# (socket-wire.ts SOCKET_ATTACHMENT_BEFORE_HELLO; no chunks on this wire).
SOCKET_ATTACHMENT_BEFORE_HELLO = 'an attachment before Worker.Hello on this connection'

HEADER = struct.Struct('>II')


class WireError(Exception):
    pass


def _read_exact(conn: socket.socket, n: int) -> bytes | None:
    """Exactly n bytes, or None if the peer ended the connection first."""
    chunks: list[bytes] = []
    while n > 0:
        chunk = conn.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b''.join(chunks)


def read_head(head: bytes, max_body: int, may_attach: bool) -> tuple[int, int]:
    """The body and attachment lengths a header announces, refused as socket-wire.ts refuses them."""
    body, attachment = HEADER.unpack(head)
    if body == 0:
        raise WireError('a message without a body')
    if body > max_body:
        raise WireError(f'a body of {body} bytes exceeds {max_body}')
    if attachment > 0 and not may_attach:
        raise WireError(SOCKET_ATTACHMENT_BEFORE_HELLO)
    if attachment > MAX_ATTACHMENT_BYTES:
        raise WireError(f'attachment exceeds {MAX_ATTACHMENT_BYTES} bytes')
    return body, attachment


def send_message(conn: socket.socket, body: bytes, attachment: bytes | None) -> None:
    conn.sendall(HEADER.pack(len(body), len(attachment or b'')) + body)
    if attachment:
        conn.sendall(attachment)


class SocketWireServer:
    """Accepts connections on one unix socket; `stop()` closes it (returns an Event, as grpc's stop)."""

    def __init__(self, path: str, runtime: WorkerRuntime, on_stop: Callable[[], None]) -> None:
        self.path = path
        self.runtime = runtime
        self.on_stop = on_stop
        self.lock = threading.Lock()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        remove_stale_socket(path)
        self.listener.bind(path)
        self.listener.listen(16)
        self.connections: set[socket.socket] = set()

    def start(self) -> None:
        threading.Thread(target=self._accept, name='socket-wire-accept', daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed by stop()
            self.connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name='socket-wire-conn', daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        stream = StreamState()
        try:
            while self._one(conn, stream):
                pass
        except WireError as e:
            sys.stderr.write(f'detsim worker {self.runtime.worker_id}: framing error, stream ended: {e}\n')
        except OSError:
            pass  # the peer went away
        finally:
            self.connections.discard(conn)
            conn.close()

    def _one(self, conn: socket.socket, stream: StreamState) -> bool:
        """Serve one request; False once the peer ended the connection."""
        head = _read_exact(conn, HEADER.size)
        if head is None:
            return False
        body_len, attachment_len = read_head(head, self.runtime.max_message_bytes, stream.introduced)
        body = _read_exact(conn, body_len)
        attachment = _read_exact(conn, attachment_len) if attachment_len else None
        if body is None or (attachment_len and attachment is None):
            return False
        with self.lock:
            out = self.runtime.handle(body, attachment, stream)
            send_message(conn, out.body, out.attachment)
        if out.stop:
            self.on_stop()
        return True

    def stop(self, _grace: float = 0) -> threading.Event:
        done = threading.Event()
        try:
            self.listener.close()
        except OSError:
            pass
        for conn in list(self.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        remove_stale_socket(self.path)
        done.set()
        return done


def start_socket_server(path: str, runtime: WorkerRuntime, on_stop: Callable[[], None]) -> SocketWireServer:
    server = SocketWireServer(path, runtime, on_stop)
    server.start()
    return server
