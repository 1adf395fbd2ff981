# Capture payload bytes exactly as workers/state-codec.ts writes them (msgpackr, records off,
# variable map sizes, objects re-keyed in UTF-16 order), lossless or refused (docs/spec/state-codec.md):
# integers in the 32-bit range take the smallest int form, wider ones int64/uint64 and beyond 64 bits
# msgpackr's big-integer ext (0x42); a float with an integral value in the 32-bit range is written as
# that int (as JavaScript holds it, so a Python float 3.0 comes back as the int 3), -0.0 and every other
# float as float64; bytes are bin; a numpy array is the ndarray ext (0x6e: dtype, shape, little-endian
# C-order bytes) and comes back as a writable array of that dtype and shape. Anything else is refused,
# naming its path. Not a general msgpack library.
from __future__ import annotations

import math
import struct
from typing import Any

from .canonical_json import utf16_key


class StateCodecError(ValueError):
    pass


def _shown(n: float) -> str:
    return 'NaN' if math.isnan(n) else ('Infinity' if n > 0 else '-Infinity')


BIGINT_EXT = 0x42
NDARRAY_EXT = 0x6E
# The largest integer msgpackr's big-integer ext writes in its chunked form (2^65536).
MAX_BIGINT_BITS = 65536
# numpy dtypes an ndarray payload may hold (numpy typestr, little-endian or byte-order-free).
NDARRAY_DTYPES = ('<f8', '<f4', '<i8', '<i4', '<i2', '|i1', '<u8', '<u4', '<u2', '|u1', '|b1')


def _write_ext(ext_type: int, data: bytes, out: bytearray) -> None:
    """A msgpack ext: fixext for 1/2/4/8/16 bytes, else ext8/16/32 (as msgpackr's writeExtensionData)."""
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}
    n = len(data)
    if n in fixed:
        out.append(fixed[n])
    elif n < 0x100:
        out += bytes([0xC7, n])
    elif n < 0x10000:
        out += b'\xc8' + n.to_bytes(2, 'big')
    else:
        out += b'\xc9' + n.to_bytes(4, 'big')
    out.append(ext_type)
    out += data


def _write_wide_int(n: int, path: str, out: bytearray) -> None:
    """An int outside the 32-bit forms: int64, uint64, or msgpackr's big-integer ext (two's complement,
    big-endian, in the fewest whole 64-bit chunks that hold it signed)."""
    if -(2**63) <= n < 2**63:
        out += b'\xd3' + n.to_bytes(8, 'big', signed=True)
    elif 0 < n < 2**64:
        out += b'\xcf' + n.to_bytes(8, 'big')
    elif n.bit_length() >= MAX_BIGINT_BITS:
        raise StateCodecError(f'state {path}: an integer of {n.bit_length()} bits is too large to capture')
    else:
        chunks = 1
        while not -(1 << (64 * chunks - 1)) <= n < (1 << (64 * chunks - 1)):
            chunks += 1
        _write_ext(BIGINT_EXT, n.to_bytes(8 * chunks, 'big', signed=True), out)


def _write_number(n: int | float, path: str, out: bytearray) -> None:
    if isinstance(n, int) and not (-(2**31) <= n <= 2**32 - 1):
        _write_wide_int(n, path, out)
        return
    if isinstance(n, float) and n.is_integer() and -(2**31) <= n <= 2**32 - 1 and not _negative_zero(n):
        n = int(n)
    if isinstance(n, int):
        if n >= 0:
            if n <= 0x7F:
                out.append(n)
            elif n <= 0xFF:
                out += bytes([0xCC, n])
            elif n <= 0xFFFF:
                out += b'\xcd' + n.to_bytes(2, 'big')
            else:
                out += b'\xce' + n.to_bytes(4, 'big')
        elif n >= -0x20:
            out.append(n & 0xFF)
        elif n >= -0x80:
            out += bytes([0xD0, n & 0xFF])
        elif n >= -0x8000:
            out += b'\xd1' + n.to_bytes(2, 'big', signed=True)
        else:
            out += b'\xd2' + n.to_bytes(4, 'big', signed=True)
        return
    out += b'\xcb' + struct.pack('>d', n)


def _write_len(length: int, fix: int | None, fix_max: int, forms: list[tuple[int, int]], out: bytearray) -> None:
    if fix is not None and length < fix_max:
        out.append(fix | length)
        return
    for tag, size in forms:
        if size == 1 and length < 0x100:
            out += bytes([tag, length])
            return
        if size == 2 and length < 0x10000:
            out += bytes([tag]) + length.to_bytes(2, 'big')
            return
        if size == 4:
            out += bytes([tag]) + length.to_bytes(4, 'big')
            return


def _negative_zero(n: float) -> bool:
    return n == 0 and math.copysign(1.0, n) < 0


def _utf8(text: str, path: str) -> bytes:
    try:
        return text.encode('utf-8')
    except UnicodeEncodeError:
        raise StateCodecError(
            f'state {path}: a string with a lone surrogate cannot be captured (it would not come back as it is)'
        ) from None


def _write(value: Any, path: str, out: bytearray, ancestors: dict[int, str] | None = None) -> None:
    if isinstance(value, (list, dict)):
        ancestors = {} if ancestors is None else ancestors
        seen = ancestors.get(id(value))
        if seen is not None:
            raise StateCodecError(f'state {path}: a cycle (it is {seen}), which cannot be captured')
        ancestors[id(value)] = path
        try:
            _write_container(value, path, out, ancestors)
        finally:
            del ancestors[id(value)]
        return
    if value is None:
        out.append(0xC0)
    elif value is True:
        out.append(0xC3)
    elif value is False:
        out.append(0xC2)
    elif type(value) in (int, float):
        if isinstance(value, float) and not math.isfinite(value):
            raise StateCodecError(f'state {path}: {_shown(value)} is not a finite number')
        _write_number(value, path, out)
    elif _is_numpy_scalar(value):
        _write(_numpy_scalar(value, path), path, out)
    elif isinstance(value, str):
        data = _utf8(value, path)
        _write_len(len(data), 0xA0, 0x20, [(0xD9, 1), (0xDA, 2), (0xDB, 4)], out)
        out += data
    elif isinstance(value, bytes):
        data = value
        _write_len(len(data), None, 0, [(0xC4, 1), (0xC5, 2), (0xC6, 4)], out)
        out += data
    elif _is_ndarray(value):
        _write_ext(NDARRAY_EXT, _ndarray_ext(value, path), out)
    elif isinstance(value, (tuple, bytearray, memoryview)):
        # Each would come back as another type (a list, bytes): refused, not committed lossy.
        back = 'a list' if isinstance(value, tuple) else 'bytes'
        raise StateCodecError(
            f'state {path}: a {type(value).__name__} would come back as {back} '
            f'(capture {back.split()[-1]}(...) and rebuild the {type(value).__name__} in restore)'
        )
    else:
        raise StateCodecError(
            f'state {path}: {type(value).__name__} cannot be captured exactly '
            '(plain data only: None, bool, int, float, str, bytes, list, dict, numpy arrays)'
        )


def _write_container(value: list | dict, path: str, out: bytearray, ancestors: dict[int, str]) -> None:
    if isinstance(value, list):
        _write_len(len(value), 0x90, 0x10, [(0xDC, 2), (0xDD, 4)], out)
        for i, item in enumerate(value):
            _write(item, f'{path}[{i}]', out, ancestors)
        return
    for key in value:
        if not isinstance(key, str):
            raise StateCodecError(
                f'state {path}: key {key!r} is not a string '
                f'(a key of type {type(key).__name__} would come back as a string)'
            )
        _utf8(key, f'{path} (a key)')
    keys = sorted(value, key=utf16_key)
    _write_len(len(keys), 0x80, 0x10, [(0xDE, 2), (0xDF, 4)], out)
    for key in keys:
        _write(key, path, out)
        _write(value[key], f'{path}.{key}', out, ancestors)


def _is_ndarray(value: Any) -> bool:
    return type(value).__module__ == 'numpy' and type(value).__name__ == 'ndarray'


def _is_numpy_scalar(value: Any) -> bool:
    return type(value).__module__ == 'numpy' and not _is_ndarray(value) and getattr(value, 'shape', None) == ()


def _numpy_scalar(value: Any, path: str) -> Any:
    """A numpy bool or integer scalar as the Python value it holds; a numpy float only when float64 (exact)."""
    kind = value.dtype.kind
    if kind in 'biu' or (kind == 'f' and value.dtype.itemsize == 8):
        return value.item()
    raise StateCodecError(
        f'state {path}: a numpy {value.dtype} scalar cannot be captured exactly '
        '(use a Python float, or a numpy array of that dtype)'
    )


def _ndarray_ext(array: Any, path: str) -> bytes:
    """The ndarray ext's data: u8 dtype length, the numpy typestr (ASCII), u8 ndim, each dim as u32
    big-endian, then the elements little-endian in C order."""
    typestr = array.dtype.newbyteorder('<').str
    if typestr not in NDARRAY_DTYPES:
        raise StateCodecError(
            f'state {path}: a numpy array of dtype {array.dtype} cannot be captured '
            f'(dtypes: {", ".join(NDARRAY_DTYPES)})'
        )
    if array.ndim > 255 or any(d > 0xFFFFFFFF for d in array.shape):
        raise StateCodecError(f'state {path}: a numpy array of shape {array.shape} cannot be captured')
    head = bytes([len(typestr)]) + typestr.encode('ascii') + bytes([array.ndim])
    dims = b''.join(int(d).to_bytes(4, 'big') for d in array.shape)
    return head + dims + array.astype(typestr, copy=False).tobytes(order='C')


def _ndarray_from_ext(data: bytes) -> Any:
    import numpy as np

    length = data[0] if data else 0
    typestr = data[1 : 1 + length].decode('ascii', 'replace')
    if typestr not in NDARRAY_DTYPES or len(data) < 2 + length:
        raise StateCodecError('state payload: an ndarray ext has an unknown dtype')
    ndim = data[1 + length]
    at = 2 + length
    shape = tuple(int.from_bytes(data[at + 4 * i : at + 4 * i + 4], 'big') for i in range(ndim))
    body = data[at + 4 * ndim :]
    dtype = np.dtype(typestr)
    if len(data) < at + 4 * ndim or len(body) != dtype.itemsize * math.prod(shape):
        raise StateCodecError('state payload: an ndarray ext does not hold its shape')
    return np.frombuffer(body, dtype=dtype).reshape(shape).copy()


def encode_state(value: Any) -> bytes:
    out = bytearray()
    _write(value, '$', out)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise StateCodecError('state payload is truncated')
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), 'big')

    def sint(self, n: int) -> int:
        return int.from_bytes(self.take(n), 'big', signed=True)

    def value(self, depth: int = 0) -> Any:
        if depth > 512:
            raise StateCodecError('state payload nests too deep')
        b = self.take(1)[0]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0x80 <= b <= 0x8F:
            return self.map(b & 0x0F, depth)
        if 0x90 <= b <= 0x9F:
            return [self.value(depth + 1) for _ in range(b & 0x0F)]
        if 0xA0 <= b <= 0xBF:
            return self.str(b & 0x1F)
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if b in simple:
            return simple[b]
        if b in (0xC4, 0xC5, 0xC6):
            return self.take(self.uint({0xC4: 1, 0xC5: 2, 0xC6: 4}[b]))
        if b == 0xCA:
            return struct.unpack('>f', self.take(4))[0]
        if b == 0xCB:
            return struct.unpack('>d', self.take(8))[0]
        if b in (0xCC, 0xCD, 0xCE, 0xCF):
            return self.uint({0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}[b])
        if b in (0xD0, 0xD1, 0xD2, 0xD3):
            return self.sint({0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}[b])
        if b in (0xD9, 0xDA, 0xDB):
            return self.str(self.uint({0xD9: 1, 0xDA: 2, 0xDB: 4}[b]))
        if b in (0xDC, 0xDD):
            return [self.value(depth + 1) for _ in range(self.uint(2 if b == 0xDC else 4))]
        if b in (0xDE, 0xDF):
            return self.map(self.uint(2 if b == 0xDE else 4), depth)
        if b in (0xD4, 0xD5, 0xD6, 0xD7, 0xD8, 0xC7, 0xC8, 0xC9):
            return self.ext(b)
        raise StateCodecError(f'state payload: unsupported msgpack type 0x{b:02x}')

    def ext(self, b: int) -> Any:
        fixed = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
        n = fixed[b] if b in fixed else self.uint({0xC7: 1, 0xC8: 2, 0xC9: 4}[b])
        ext_type = self.take(1)[0]
        data = self.take(n)
        if ext_type == BIGINT_EXT and n > 0:
            return int.from_bytes(data, 'big', signed=True)
        if ext_type == NDARRAY_EXT:
            return _ndarray_from_ext(data)
        raise StateCodecError(f'state payload: unsupported msgpack ext type {ext_type}')

    def str(self, n: int) -> str:
        try:
            return self.take(n).decode('utf-8')
        except UnicodeDecodeError:
            raise StateCodecError('state payload: a string is not UTF-8') from None

    def map(self, n: int, depth: int) -> dict:
        out: dict = {}
        for _ in range(n):
            key = self.value(depth + 1)
            if not isinstance(key, str):
                raise StateCodecError('state payload: a map key is not a string')
            out[key] = self.value(depth + 1)
        return out


def decode_state(data: bytes) -> Any:
    reader = _Reader(bytes(data))
    value = reader.value()
    if reader.pos != len(reader.data):
        raise StateCodecError('state payload has trailing bytes')
    return value
