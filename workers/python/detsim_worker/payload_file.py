# The store confinement of store-files-v1 on the worker side (workers/payload-file.ts): read a
# payload's byte range from a checkpoint file inside --store-dir; every other path gets the same
# refusal, so the refusals reveal nothing about files the worker cannot read. A held capture's
# payload goes the other way: into a checkpoint TEMP file of the same store (write_store_temp, which
# hashes what it writes); a committed generation or the store manifest is never writable.
# Not the digest check (checks.py) and not the held capture (capture_file.py).
from __future__ import annotations

import hashlib
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor

from .protocol import ProtocolRefusal

REFUSALS = {
    'no_store': 'params.payload.file: this worker was started without --store-dir and reads no payload files (send '
    'the payload as an attachment)',
    'outside': "params.payload.file.path is not a regular file inside this worker's store directory",
    'past_end': 'params.payload.file: offset + byteLength run past the end of the payload file',
    'unreadable': 'params.payload.file: the payload file cannot be read',
}

# Refusal texts of State.WritePayload, word for word the TypeScript worker's (CAPTURE_FILE_REFUSALS).
WRITE_REFUSALS = {
    'no_store': 'params.file: this worker was started without --store-dir and writes no checkpoint files',
    'not_temp': 'params.file.path is not a checkpoint temporary file (tmp-<checkpointId>.flysess) '
    "inside this worker's store directory",
    'unwritable': 'params.file: the checkpoint temporary file cannot be written',
}
# The only files State.WritePayload writes: the store's checkpoint temporaries.
TEMP_GENERATION = re.compile(r'^tmp-[a-z0-9][a-z0-9._-]{0,63}\.flysess\Z')
# A write moves this much per call: the next slice is hashed while this one is written.
HASHED_WRITE_BYTES = 4 * 1024 * 1024


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
    fd = _open_inside_store(store_dir, path, os.O_RDONLY, REFUSALS['outside'])
    try:
        if offset + byte_length > os.fstat(fd).st_size:
            raise ProtocolRefusal('BUFFER_INVALID', REFUSALS['past_end'])
        pieces: list[bytes] = []
        done = 0
        while done < byte_length:
            try:
                # Linux moves at most 0x7ffff000 bytes a call; most ranges come back in one piece.
                got = os.pread(fd, min(byte_length - done, 0x7FFFF000), offset + done)
            except OSError:
                raise ProtocolRefusal('BUFFER_INVALID', REFUSALS['unreadable']) from None
            if not got:
                raise ProtocolRefusal('BUFFER_INVALID', REFUSALS['past_end'])
            pieces.append(got)
            done += len(got)
        # One piece is returned as read: no second copy of a payload that came in one read.
        return pieces[0] if len(pieces) == 1 else b''.join(pieces)
    finally:
        os.close(fd)


def write_store_temp(store_dir: str | None, path: str, offset: int, data: bytes) -> str:
    """Write `data` at `offset` of `path`, which must resolve to an existing regular file under the store
    named like a checkpoint temporary (the coordinator created it; nothing else is writable), and
    return the SHA-256 of the bytes written: each 4 MiB slice is hashed on a helper thread while
    this one writes it (both release the GIL), so the hash costs no time beyond the write's own."""
    if store_dir is None:
        raise ProtocolRefusal('UNSUPPORTED', WRITE_REFUSALS['no_store'])
    if not TEMP_GENERATION.match(os.path.basename(path)):
        raise ProtocolRefusal('INVALID_ARGUMENT', WRITE_REFUSALS['not_temp'])
    fd = _open_inside_store(store_dir, path, os.O_WRONLY, WRITE_REFUSALS['not_temp'])
    try:
        # The resolved name must still be a temporary (a symlink named tmp-* could point elsewhere in the store).
        real = _realpath(path)
        if real is None or not TEMP_GENERATION.match(os.path.basename(real)):
            raise ProtocolRefusal('INVALID_ARGUMENT', WRITE_REFUSALS['not_temp'])
        return _write_hashed(fd, offset, memoryview(data))
    finally:
        os.close(fd)


def _write_hashed(fd: int, offset: int, data: memoryview) -> str:
    digest = hashlib.sha256()
    with ThreadPoolExecutor(max_workers=1) as hasher:
        for at in range(0, len(data), HASHED_WRITE_BYTES):
            part = data[at : at + HASHED_WRITE_BYTES]
            hashing = hasher.submit(digest.update, part)
            wrote = _write_all(fd, part, offset + at)
            hashing.result()
            if not wrote:
                raise ProtocolRefusal('BUFFER_INVALID', WRITE_REFUSALS['unwritable'])
    return digest.hexdigest()


def _write_all(fd: int, part: memoryview, position: int) -> bool:
    """All of `part` at `position`; False when the file refuses (any error, or no progress)."""
    at = 0
    while at < len(part):
        try:
            wrote = os.pwrite(fd, part[at:], position + at)
        except (OSError, OverflowError):
            return False
        if wrote <= 0:
            return False
        at += wrote
    return True


def _open_inside_store(store_dir: str, path: str, flags: int, refusal: str) -> int:
    """A descriptor of the real file behind `path`, only if it lies under the store and is a regular
    file; otherwise INVALID_ARGUMENT `refusal`, the same for every reason."""
    outside = ProtocolRefusal('INVALID_ARGUMENT', refusal)
    root, real = _realpath(store_dir), _realpath(path)
    if root is None or real is None or not _is_under(root, real):
        raise outside
    try:
        # O_NOFOLLOW: the resolved path has no symlink left; O_NONBLOCK: a FIFO cannot stall the open.
        fd = os.open(real, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise outside from None
    try:
        # The path may have been swapped between realpath and open: the opened file must be the very
        # file (device and inode) the path still resolves to under the store.
        opened = os.fstat(fd)
        again = _realpath(path)
        there = os.stat(again) if again is not None and _is_under(root, again) else None
        if (
            not stat.S_ISREG(opened.st_mode)
            or there is None
            or (there.st_dev, there.st_ino) != (opened.st_dev, opened.st_ino)
        ):
            raise outside
        return fd
    except BaseException:
        os.close(fd)
        raise
