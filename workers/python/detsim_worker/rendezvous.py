# Rendezvous records (core/protocol/rendezvous.ts): the one file a worker started with
# `--rendezvous DIR` writes once it is listening, so a coordinator sharing DIR can find it. The same
# canonical JSON bytes as the TypeScript worker for the same facts, written atomically (temp + fsync +
# rename + directory fsync) and removed on exit while still ours. Physical: never in a ReproHash.
# Not the coordinator's waiting and checking.
from __future__ import annotations

import json
import os
import re

from .canonical_json import canonical_bytes
from .scalars import InputError

RENDEZVOUS_FORMAT = 'detsim-rendezvous-v1'
WILDCARD_HOSTS = ('0.0.0.0', '::', '[::]')


def _tcp_address(text: str) -> tuple[str, int] | None:
    """host:port as core/protocol/contract.ts parseAddress reads it, or None (unix: or malformed)."""
    m = re.fullmatch(r'(.+):([0-9]{1,5})', text, re.S)
    if text.startswith('unix:') or not m or int(m.group(2)) > 65535:
        return None
    return m.group(1), int(m.group(2))


def check_advertise(listen: str, rendezvous: str | None, advertise: str | None) -> None:
    """--advertise HOST:PORT only with --rendezvous; required when listening on a wildcard host."""
    if advertise is not None:
        if rendezvous is None:
            raise InputError('struct_invalid_field', '--advertise is only used with --rendezvous DIR')
        if _tcp_address(advertise) is None:
            raise InputError('struct_invalid_field', '--advertise must be HOST:PORT')
        return
    address = _tcp_address(listen)
    if rendezvous is not None and address is not None and address[0] in WILDCARD_HOSTS:
        raise InputError(
            'struct_missing_field',
            f'--advertise HOST:PORT is required with --rendezvous when listening on {address[0]} (no peer can dial it)',
        )


def check_rendezvous_dir(path: str | None) -> str | None:
    if path is None:
        return None
    if not os.path.isdir(path):
        from .canonical_json import js_stringify

        raise InputError('struct_invalid_field', f'--rendezvous {js_stringify(path)} is not an existing directory')
    return os.path.abspath(path)


def advertised_address(bound: str, advertise: str | None) -> str:
    """--advertise (its port 0 = the bound port), else the bound address."""
    if advertise is None:
        return bound
    wanted, actual = _tcp_address(advertise), _tcp_address(bound)
    if wanted is None or wanted[1] != 0 or actual is None:
        return advertise
    return f'{wanted[0]}:{actual[1]}'


def certificate_fingerprint(pem: bytes) -> str:
    """Lowercase hex SHA-256 of the DER certificate (core/protocol/tls.ts certificateFingerprint)."""
    import hashlib
    import ssl

    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem.decode('ascii'))).hexdigest()


def record_bytes(record: dict) -> bytes:
    return canonical_bytes(record) + b'\n'


def write_record(
    directory: str,
    worker_id: str,
    role: str,
    address: str,
    session: str | None,
    contract_digest: str,
    fingerprint: str | None = None,
) -> tuple[str, bytes]:
    """Write this worker's record atomically; returns its path and bytes (for remove_record)."""
    record = {
        'format': RENDEZVOUS_FORMAT,
        'workerId': worker_id,
        'role': role,
        'address': address,
        'session': session,
        'contractDigest': contract_digest,
        'certificateFingerprint': fingerprint,
    }
    data = record_bytes(record)
    path = os.path.join(directory, f'{worker_id}.json')
    tmp = os.path.join(directory, f'.{worker_id}.json.tmp-{os.getpid()}')
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path, data


def remove_record(path: str, written: bytes) -> None:
    """Remove the record on the way out, only while it is still the one this worker wrote."""
    try:
        with open(path, 'rb') as f:
            if f.read() == written:
                os.remove(path)
    except OSError:
        pass


def live_namesake(directory: str, worker_id: str) -> tuple[str, str] | None:
    """(path, address) of a record of this worker id whose worker answers at its address, else None:
    a worker of a live one's id is refused rather than replace its record (process.ts refuseLiveNamesake);
    a record nobody answers at is stale and is replaced."""
    path = os.path.join(directory, f'{worker_id}.json')
    try:
        with open(path, 'rb') as f:
            address = json.loads(f.read())['address']
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (path, address) if isinstance(address, str) and _answers_at(address) else None


def _answers_at(address: str) -> bool:
    """Whether something accepts a connection at unix:/path or host:port within a second."""
    import socket

    try:
        if address.startswith('unix:'):
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1)
                s.connect(address[len('unix:') :])
            return True
        host, _, port = address.rpartition(':')
        with socket.create_connection((host.strip('[]'), int(port)), timeout=1):
            return True
    except (OSError, ValueError):
        return False
