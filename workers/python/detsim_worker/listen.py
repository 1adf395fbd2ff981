# Where a worker listens (contract.ts parseListenAddress, server.ts checkListenResolves): unix
# sockets and loopback TCP hosts (any host with TLS and a token), worded as the TypeScript worker;
# stale socket files; the limits both wires share. No transport: imports neither gRPC nor sockets'
# servers, so a worker on the socket wire never loads grpcio. Not the servers (server.py, socket_wire.py).
from __future__ import annotations

import ipaddress
import os
import re
import socket
import stat
from dataclasses import dataclass

from .scalars import InputError

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
