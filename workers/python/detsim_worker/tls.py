# Mutual TLS and the bearer token for the Python worker, worded as the TypeScript worker's
# (core/formats/tls-dir.ts: the files of a `detsim certs` directory and their refusals;
# core/protocol/tls.ts: the token check and its refusal texts; workers/process.ts: the flags).
# Not the server (server.py). Never echoes a file's bytes or the token.
from __future__ import annotations

import errno
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

from .scalars import InputError

TOKEN_METADATA_KEY = 'authorization'
TOKEN_REFUSALS = {
    'ident_token_missing': 'authorization: the call carries no bearer token; this worker serves only its run',
    'ident_token_wrong': "authorization: the bearer token is not this worker's run token",
}
WORKER_FILES = {'ca': 'ca.pem', 'cert': 'worker.pem', 'key': 'worker-key.pem', 'token': 'token'}
FILE_FLAGS = (('ca', '--tls-ca'), ('cert', '--tls-cert'), ('key', '--tls-key'), ('token', '--token-file'))
_TOKEN_FORM = re.compile(r'[A-Za-z0-9._~+/=-]{32,256}')


@dataclass
class TlsMaterial:
    ca: bytes
    cert: bytes
    key: bytes
    token: str  # secret: never logged


def read_tls_flags(v: dict) -> dict | None:
    """The paths of this worker's TLS files (as readTlsFlags in workers/process.ts); None without TLS."""
    given = [(key, flag) for key, flag in FILE_FLAGS if flag in v]
    # --token-file alone is a plaintext TCP worker's per-run secret (read_plain_token), not TLS.
    if '--tls-dir' not in v and all(key == 'token' for key, _ in given):
        return None
    for flag in ('--tls-dir', *(f for _, f in FILE_FLAGS)):
        if flag in v and v[flag] == '':
            raise InputError('struct_invalid_field', f'{flag} takes a path')
    if '--tls-dir' not in v:
        missing = next(((k, f) for k, f in FILE_FLAGS if f not in v), None)
        if missing:
            raise InputError(
                'struct_missing_field',
                f'{missing[1]} is required with {given[0][1]} (or give --tls-dir DIR made by detsim certs)',
            )
    base = v.get('--tls-dir')
    return {key: v.get(flag) or os.path.join(base, WORKER_FILES[key]) for key, flag in FILE_FLAGS}


def read_token_file(path: str, field: str) -> str:
    """A run's bearer token from its file (tls-dir.ts readTokenFile), refused naming the path, never its content."""
    token = _read(path, 'token', field).decode('utf-8', 'replace').strip()
    if not _TOKEN_FORM.fullmatch(token):
        raise InputError(
            'perm_tls_unreadable', f'{field}: token {path} must hold one line of 32 to 256 URL-safe characters'
        )
    return token


PLAINTEXT_TCP_UNBOUND = (
    '--listen: a plaintext TCP worker needs --session and --token-file (a per-run secret every stream '
    'must present; any local user can reach a loopback port); or listen on unix:/abs/path, or serve '
    'TLS (--tls-dir)'
)


def read_plain_token(v: dict, tcp: bool) -> str | None:
    """--token-file alone: a plaintext TCP worker's per-run secret; a plaintext TCP worker needs it and --session "
    "(process.ts)."""
    path = v.get('--token-file')
    if path == '':
        raise InputError('struct_invalid_field', '--token-file takes a path')
    token = read_token_file(path, '--token-file') if path is not None else None
    if tcp and (token is None or v.get('--session') is None):
        raise InputError('perm_plaintext_tcp_unbound', PLAINTEXT_TCP_UNBOUND)
    return token


def read_tls_material(paths: dict, field: str) -> TlsMaterial:
    """Read the files; a missing, unreadable or malformed one is refused naming its path (readTlsMaterial)."""
    token = read_token_file(paths['token'], field)
    certificate = re.compile(rb'-----BEGIN CERTIFICATE-----')
    return TlsMaterial(
        ca=_pem(paths['ca'], 'CA certificate', field, certificate),
        cert=_pem(paths['cert'], 'certificate', field, certificate),
        key=_pem(paths['key'], 'private key', field, re.compile(rb'-----BEGIN (EC |RSA )?PRIVATE KEY-----')),
        token=token,
    )


def _pem(path: str, what: str, field: str, marker: re.Pattern) -> bytes:
    data = _read(path, what, field)
    if not marker.search(data):
        raise InputError('perm_tls_unreadable', f'{field}: {what} {path} is not a PEM {what}')
    return data


def _read(path: str, what: str, field: str) -> bytes:
    try:
        with open(path, 'rb') as f:
            return f.read()
    except OSError as e:
        code = errno.errorcode.get(e.errno or 0, 'unreadable')
        raise InputError('perm_tls_unreadable', f'{field}: {what} {path} cannot be read ({code})') from None


def check_bearer(expected: str, presented: str | None) -> str | None:
    """None when `presented` is `Bearer <expected>`, else the refusal code; compared as SHA-256 digests in constant "
    "time."""
    if not isinstance(presented, str) or not presented.startswith('Bearer ') or len(presented) == len('Bearer '):
        return 'ident_token_missing'
    digest = lambda text: hashlib.sha256(text.encode('utf-8')).digest()  # noqa: E731
    return None if hmac.compare_digest(digest(presented[len('Bearer ') :]), digest(expected)) else 'ident_token_wrong'


def describe_field(v: dict) -> str:
    """The flag TLS refusals name (tlsField in workers/process.ts)."""
    return '--tls-dir' if '--tls-dir' in v else '--tls-cert'


__all__ = [
    'TOKEN_METADATA_KEY',
    'TOKEN_REFUSALS',
    'TlsMaterial',
    'check_bearer',
    'read_tls_flags',
    'read_tls_material',
    'describe_field',
]
