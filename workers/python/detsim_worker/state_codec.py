# Capture payload bytes exactly as workers/state-codec.ts writes them (msgpackr, records off,
# variable map sizes, objects re-keyed in UTF-16 order): integers that fit u32/i32 take the smallest
# int form (so 3.0 is the int 3, as JavaScript holds it), other numbers float64; bytes are bin.
# numpy arrays are stored as their little-endian bytes (bin). Not a general msgpack library.
from __future__ import annotations

import math
import struct
from typing import Any

from .canonical_json import utf16_key


class StateCodecError(ValueError):
    pass


def _shown(n: float) -> str:
    return 'NaN' if math.isnan(n) else ('Infinity' if n > 0 else '-Infinity')


def _write_number(n: int | float, out: bytearray) -> None:
    if isinstance(n, int) and not (-2**31 <= n <= 2**32 - 1):
        n = float(n)
    if isinstance(n, float) and n.is_integer() and -2**31 <= n <= 2**32 - 1:
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


def _write(value: Any, path: str, out: bytearray) -> None:
    if value is None:
        out.append(0xC0)
    elif value is True:
        out.append(0xC3)
    elif value is False:
        out.append(0xC2)
    elif isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise StateCodecError(f'state {path}: {_shown(value)} is not a finite number')
        _write_number(value, out)
    elif isinstance(value, str):
        data = value.encode('utf-8')
        _write_len(len(data), 0xA0, 0x20, [(0xD9, 1), (0xDA, 2), (0xDB, 4)], out)
        out += data
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        _write_len(len(data), None, 0, [(0xC4, 1), (0xC5, 2), (0xC6, 4)], out)
        out += data
    elif _is_ndarray(value):
        _write(_ndarray_bytes(value), path, out)
    elif isinstance(value, (list, tuple)):
        _write_len(len(value), 0x90, 0x10, [(0xDC, 2), (0xDD, 4)], out)
        for i, item in enumerate(value):
            _write(item, f'{path}[{i}]', out)
    elif isinstance(value, dict):
        keys = sorted(value, key=utf16_key)
        _write_len(len(keys), 0x80, 0x10, [(0xDE, 2), (0xDF, 4)], out)
        for key in keys:
            if not isinstance(key, str):
                raise StateCodecError(f'state {path}: key {key!r} is not a string')
            _write(key, path, out)
            _write(value[key], f'{path}.{key}', out)
    else:
        raise StateCodecError(f'state {path}: {type(value).__name__} cannot be captured')


def _is_ndarray(value: Any) -> bool:
    return type(value).__module__ == 'numpy' and type(value).__name__ == 'ndarray'


def _ndarray_bytes(array: Any) -> bytes:
    """The documented layout: C order, little-endian elements, no header (the dtype is the model's business)."""
    return array.astype(array.dtype.newbyteorder('<'), copy=False).tobytes(order='C')


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
        chunk = self.data[self.pos:end]
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
        raise StateCodecError(f'state payload: unsupported msgpack type 0x{b:02x}')

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
