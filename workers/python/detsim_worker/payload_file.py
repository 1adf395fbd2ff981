# payload-file-v1 on the worker side (workers/payload-file.ts): read a payload's byte range from a
# checkpoint file inside --store-dir; every other path gets the same refusal, so the refusals
# reveal nothing about files the worker cannot read. Not the digest check (checks.py).
from __future__ import annotations

import os
import stat

from .protocol import ProtocolRefusal

REFUSALS = {
    'no_store': 'params.payload.file: this worker was started without --store-dir and reads no payload files (send the payload as an attachment)',
    'outside': "params.payload.file.path is not a regular file inside this worker's store directory",
    'past_end': 'params.payload.file: offset + byteLength run past the end of the payload file',
    'unreadable': 'params.payload.file: the payload file cannot be read',
}


def _is_under(root: str, real: str) -> bool:
    rel = os.path.relpath(real, root)
    return rel != '.' and rel != '..' and not rel.startswith('..' + os.sep) and not os.path.isabs(rel)


def _realpath(path: str) -> str | None:
    try:
        real = os.path.realpath(path, strict=True)
    except (OSError, ValueError):
        return None
    return real


def read_store_range(store_dir: str | None, path: str, offset: int, byte_length: int) -> bytes:
    if store_dir is None:
        raise ProtocolRefusal('UNSUPPORTED', REFUSALS['no_store'])
    outside = ProtocolRefusal('INVALID_ARGUMENT', REFUSALS['outside'])
    root, real = _realpath(store_dir), _realpath(path)
    if root is None or real is None or not _is_under(root, real):
        raise outside
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise outside from None
    try:
        opened = os.fstat(fd)
        again = _realpath(path)
        there = os.stat(again) if again is not None and _is_under(root, again) else None
        if not stat.S_ISREG(opened.st_mode) or there is None or (there.st_dev, there.st_ino) != (opened.st_dev, opened.st_ino):
            raise outside
        if offset + byte_length > opened.st_size:
            raise ProtocolRefusal('BUFFER_INVALID', REFUSALS['past_end'])
        out = bytearray()
        while len(out) < byte_length:
            try:
                got = os.pread(fd, byte_length - len(out), offset + len(out))
            except OSError:
                raise ProtocolRefusal('BUFFER_INVALID', REFUSALS['unreadable']) from None
            if not got:
                raise ProtocolRefusal('BUFFER_INVALID', REFUSALS['past_end'])
            out += got
        return bytes(out)
    finally:
        os.close(fd)
