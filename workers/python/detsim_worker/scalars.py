# Protocol scalars and readers, worded as core/formats/scalars.ts words them: Id, U64, Digest,
# request ids, i32, objects, unknown-field refusals, RationalNs durations and Scope.
# Readers raise InputError (a refused input); they never mutate anything.
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .canonical_json import js_stringify

ID_RE = re.compile(r'[a-z0-9][a-z0-9._-]{0,63}')
U64_RE = re.compile(r'0|[1-9][0-9]*')
DIGEST_RE = re.compile(r'[0-9a-f]{64}')
REQUEST_ID_RE = re.compile(r'req-(0|[1-9][0-9]*)')
U64_MAX = 2**64 - 1


class InputError(ValueError):
    """A refused input (the TypeScript DetsimError): `reason` is the registry code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def describe(value: Any) -> str:
    """How a refused value is shown (JSON.stringify, long strings cut)."""
    if isinstance(value, str):
        return js_stringify(value if len(value) <= 80 else value[:77] + '...')
    if value is _MISSING:
        return 'nothing'
    return js_stringify(value)


class _Missing:
    pass


_MISSING: Any = _Missing()
MISSING = _MISSING


def is_int(value: Any) -> bool:
    """Number.isInteger: an int, or a float with no fraction (never a bool)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def is_id(value: Any) -> bool:
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


def read_id(value: Any, field: str) -> str:
    if not is_id(value):
        raise InputError(
            'struct_invalid_id',
            f'{field}: {describe(value)} is not an Id (1-64 of a-z 0-9 . _ -, starting with a letter or digit)',
        )
    return value


def is_u64(value: Any) -> bool:
    return isinstance(value, str) and U64_RE.fullmatch(value) is not None and len(value) <= 20 and int(value) <= U64_MAX


def read_u64(value: Any, field: str) -> str:
    if not is_u64(value):
        raise InputError(
            'struct_invalid_u64',
            f'{field}: {describe(value)} is not a U64 (a decimal string, "0" or no leading zero, at most '
            '18446744073709551615)',
        )
    return value


def read_digest(value: Any, field: str) -> str:
    if not isinstance(value, str) or DIGEST_RE.fullmatch(value) is None:
        raise InputError(
            'struct_invalid_digest', f'{field}: {describe(value)} is not a SHA-256 digest (64 lowercase hex)'
        )
    return value


def read_request_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or REQUEST_ID_RE.fullmatch(value) is None or not is_u64(value[4:]):
        raise InputError('struct_invalid_field', f'{field}: {describe(value)} is not a request id req-<U64>')
    return value


def read_i32(value: Any, field: str) -> int:
    if not is_int(value) or value < -2147483648 or value > 2147483647:
        raise InputError('struct_invalid_field', f'{field}: {describe(value)} is not a signed 32-bit integer')
    return int(value)


def refuse_unknown_fields(obj: dict, allowed: list[str] | tuple[str, ...], field: str) -> None:
    for key in sorted(obj, key=lambda k: k.encode('utf-16-be', 'surrogatepass')):
        if key not in allowed:
            raise InputError('struct_unknown_field', f'{field}: unknown field {js_stringify(key)}')


def read_object(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise InputError('struct_invalid_field', f'{field}: {describe(value)} is not an object')
    return value


@dataclass(frozen=True)
class RationalNs:
    """Exact nanoseconds as a reduced fraction of U64s."""

    num: int
    den: int

    @staticmethod
    def read(value: Any, field: str) -> 'RationalNs':
        obj = read_object(value, field)
        refuse_unknown_fields(obj, ['numerator', 'denominator'], field)
        num = int(read_u64(obj.get('numerator', MISSING), f'{field}.numerator'))
        den = int(read_u64(obj.get('denominator', MISSING), f'{field}.denominator'))
        if den == 0:
            raise InputError('struct_invalid_rational', f'{field}: denominator is 0')
        if math.gcd(num, den) != 1:
            raise InputError('struct_invalid_rational', f'{field}: {num}/{den} is not reduced (zero is 0/1)')
        return RationalNs(num, den)

    @staticmethod
    def read_duration(value: Any, field: str) -> 'RationalNs':
        r = RationalNs.read(value, field)
        if r.num == 0:
            raise InputError('struct_invalid_rational', f'{field}: a duration must be non-zero')
        return r

    @staticmethod
    def of(num: int, den: int) -> 'RationalNs':
        g = math.gcd(num, den) or 1
        return RationalNs(num // g, den // g)

    def to_json(self) -> dict:
        return {'denominator': str(self.den), 'numerator': str(self.num)}

    def __str__(self) -> str:
        return f'{self.num}/{self.den}'


def read_scope(value: Any, field: str) -> dict:
    obj = read_object(value, field)
    refuse_unknown_fields(obj, ['sessionId', 'epoch', 'step'], field)
    session_id = read_id(obj.get('sessionId', MISSING), f'{field}.sessionId')
    epoch = read_id(obj.get('epoch', MISSING), f'{field}.epoch')
    step = read_u64(obj.get('step', MISSING), f'{field}.step')
    return {'epoch': epoch, 'sessionId': session_id, 'step': step}
