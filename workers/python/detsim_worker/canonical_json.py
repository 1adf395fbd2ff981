# RFC 8785 (JCS) canonical JSON for the Python worker: the writer (ECMAScript number text, UTF-16
# key order, the JCS string escaping), a strict parser (no duplicate keys, no lone surrogates, no
# non-finite or unsafe integer literals) and SHA-256 digests over the canonical bytes.
# Not a general JSON library. Mirrors core/formats/canonical-json.ts.
from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

MAX_DEPTH = 512
MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalJsonError(ValueError):
    """A value that cannot be written, or text that must not be parsed; `reason` is the registry code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_number(value: int | float) -> str:
    """ECMAScript Number::toString (what RFC 8785 adopts); -0 prints as 0."""
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return int.__repr__(value)  # the digits, also of an int subclass (an IntEnum's str is its name)
        value = float(value)  # JavaScript holds it as the nearest double
    if not math.isfinite(value):
        shown = 'NaN' if math.isnan(value) else ('Infinity' if value > 0 else '-Infinity')
        raise CanonicalJsonError('struct_non_finite_number', f'cannot serialize {shown} as JSON')
    if value == 0:
        return '0'
    sign = '-' if value < 0 else ''
    digits, point = _shortest_digits(abs(value))
    return sign + _es_layout(digits, point)


def _shortest_digits(x: float) -> tuple[str, int]:
    """Shortest round-trip digits d1..dk and n such that x = 0.d1..dk * 10^n (repr is shortest)."""
    # float's own repr, also for a float subclass: numpy's float64 is one, and its repr is "np.float64(…)".
    text = float.__repr__(x)
    exp = 0
    if 'e' in text:
        text, e = text.split('e')
        exp = int(e)
    whole, _, frac = text.partition('.')
    raw = whole + frac
    stripped = raw.lstrip('0')
    point = len(whole) + exp - (len(raw) - len(stripped))
    return stripped.rstrip('0'), point


def _es_layout(digits: str, n: int) -> str:
    k = len(digits)
    if k <= n <= 21:
        return digits + '0' * (n - k)
    if 0 < n <= 21:
        return f'{digits[:n]}.{digits[n:]}'
    if -6 < n <= 0:
        return '0.' + '0' * (-n) + digits
    e = n - 1
    mantissa = digits if k == 1 else f'{digits[0]}.{digits[1:]}'
    return f'{mantissa}e{"+" if e >= 0 else "-"}{abs(e)}'


_ESCAPES = {'"': '\\"', '\\': '\\\\', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t'}


def _render_path(stack: list[str | int]) -> str:
    path = '$' + ''.join(f'[{s}]' if isinstance(s, int) else f'.{s}' for s in stack)
    return path if len(path) <= 200 else path[:197] + '...'


def format_string(s: str, stack: list[str | int] | None = None) -> str:
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20:
            out.append(f'\\u{code:04x}')
        elif 0xD800 <= code <= 0xDFFF:
            raise CanonicalJsonError(
                'struct_invalid_json', f'lone surrogate in a string at {_render_path(stack or [])}'
            )
        else:
            out.append(ch)
    out.append('"')
    return ''.join(out)


def utf16_key(s: str) -> bytes:
    """Sort key: UTF-16 code units, RFC 8785's property order (and JavaScript's default sort)."""
    return s.encode('utf-16-be', 'surrogatepass')


def _write(value: Any, stack: list[str | int], out: list[str]) -> None:
    if len(stack) > MAX_DEPTH:
        raise CanonicalJsonError(
            'struct_invalid_json', f'nesting deeper than {MAX_DEPTH} (or a cycle) at {_render_path(stack)}'
        )
    if value is None:
        out.append('null')
    elif value is True:
        out.append('true')
    elif value is False:
        out.append('false')
    elif is_number(value):
        if isinstance(value, float) and not math.isfinite(value):
            shown = 'NaN' if math.isnan(value) else ('Infinity' if value > 0 else '-Infinity')
            raise CanonicalJsonError(
                'struct_non_finite_number', f'{shown} at {_render_path(stack)} is not a finite number'
            )
        if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
            # Every reader (the coordinator's strict parser first) refuses such a literal: refuse it here, by path.
            raise CanonicalJsonError(
                'struct_invalid_json',
                f'the integer at {_render_path(stack)} is beyond ±(2^53−1), '
                'which JSON cannot carry exactly (send it as a string)',
            )
        out.append(format_number(value))
    elif isinstance(value, str):
        out.append(format_string(value, stack))
    elif isinstance(value, (list, tuple)):
        out.append('[')
        for i, item in enumerate(value):
            if i:
                out.append(',')
            stack.append(i)
            _write(item, stack, out)
            stack.pop()
        out.append(']')
    elif isinstance(value, dict):
        out.append('{')
        for i, key in enumerate(sorted(value, key=utf16_key)):
            if not isinstance(key, str):
                raise CanonicalJsonError('struct_unsupported_value', f'a non-string key at {_render_path(stack)}')
            if i:
                out.append(',')
            out.append(format_string(key, stack))
            out.append(':')
            stack.append(key)
            _write(value[key], stack, out)
            stack.pop()
        out.append('}')
    else:
        raise CanonicalJsonError(
            'struct_unsupported_value', f'{type(value).__name__} at {_render_path(stack)} cannot be written as JSON'
        )


def canonicalize(value: Any) -> str:
    """The RFC 8785 canonical text of a JSON value."""
    out: list[str] = []
    _write(value, [], out)
    return ''.join(out)


def canonical_bytes(value: Any) -> bytes:
    return canonicalize(value).encode('utf-8')


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode('utf-8') if isinstance(data, str) else data).hexdigest()


def canonical_digest(value: Any) -> str:
    return sha256_hex(canonical_bytes(value))


def js_stringify(value: Any) -> str:
    """JSON.stringify(value) for plain data: insertion key order, compact, ECMAScript numbers."""
    if isinstance(value, dict):
        return '{' + ','.join(f'{format_string(k)}:{js_stringify(v)}' for k, v in value.items()) + '}'
    if isinstance(value, (list, tuple)):
        return '[' + ','.join(js_stringify(v) for v in value) + ']'
    if is_number(value) and isinstance(value, float) and not math.isfinite(value):
        return 'null'
    if isinstance(value, (bytes, bytearray)):
        return '{' + ','.join(f'"{i}":{b}' for i, b in enumerate(value)) + '}'
    return canonicalize(value)


# ---- strict parser ---------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CanonicalJsonError('struct_invalid_json', f'duplicate key {js_stringify(key)}')
        out[key] = value
    return out


class _UnsafeInteger(Exception):
    """Raised by the parse_int hook; parse_strict turns it into the refusal with the literal's offset."""

    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


# JSON tokens that may hold digits: a whole string (skipped) or a number.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?')


def _parse_int(text: str) -> int:
    # JSON has no leading zeros, so 17 digits or more is beyond 2^53-1: refused before int() (which
    # would refuse 4,300 digits in its own words) ever reads them.
    if len(text.lstrip('-')) > 16 or abs(int(text)) > MAX_SAFE_INTEGER:
        raise _UnsafeInteger(text)
    return int(text)


def _unsafe_integer(text: str, literal: str) -> CanonicalJsonError:
    """The refusal in core/formats/canonical-json.ts's words and reason: the literal, its offset in UTF-16 units."""
    # json.loads reads left to right, so the first integer token with this text is the one it refused.
    start = next((m.start() for m in _TOKEN.finditer(text) if m.group() == literal), 0)
    offset = len(text[:start].encode('utf-16-le')) // 2
    if not math.isfinite(float(literal)):  # beyond a double altogether: refused as not a number first
        return CanonicalJsonError('struct_invalid_json', f'number {literal} is out of range at offset {offset}')
    return CanonicalJsonError(
        'struct_unsafe_integer',
        f'integer {literal} is beyond ±(2^53−1); write counters as U64 strings at offset {offset}',
    )


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise CanonicalJsonError('struct_non_finite_number', f'number literal {text[:40]} is not finite')
    return value


def _refuse_constant(text: str) -> Any:
    raise CanonicalJsonError('struct_invalid_json', f'{text} is not JSON')


def _check_tree(value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CanonicalJsonError('struct_invalid_json', f'nesting deeper than {MAX_DEPTH}')
    if isinstance(value, str):
        _check_string(value)
    elif isinstance(value, list):
        for item in value:
            _check_tree(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_string(key)
            _check_tree(item, depth + 1)


def _check_string(s: str) -> None:
    try:
        s.encode('utf-8')
    except UnicodeEncodeError:
        raise CanonicalJsonError('struct_invalid_json', 'lone surrogate in a string') from None


# A \uD800-\uDFFF escape: the only way a text decoded from UTF-8 can hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r'\\u[dD][89a-fA-F]')


def _needs_tree_check(text: str) -> bool:
    """Whether the parsed value must be walked for lone surrogates and depth: only when the text has
    a surrogate escape (a valid pair passes the walk) or more opening brackets than MAX_DEPTH."""
    return _SURROGATE_ESCAPE.search(text) is not None or text.count('[') + text.count('{') > MAX_DEPTH


def parse_strict(data: bytes | str) -> Any:
    """Parse JSON text strictly (see the module comment); raises CanonicalJsonError."""
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode('utf-8')
        except UnicodeDecodeError:
            raise CanonicalJsonError('struct_invalid_json', 'the text is not valid UTF-8') from None
    else:
        text = data
        _check_string(text)  # a str given as is may hold a raw lone surrogate
    if text.startswith('\ufeff'):
        raise CanonicalJsonError('struct_invalid_json', 'a byte order mark is not JSON')
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_refuse_constant,
        )
    except CanonicalJsonError:
        raise
    except _UnsafeInteger as e:
        raise _unsafe_integer(text, e.literal) from None
    except RecursionError:
        raise CanonicalJsonError('struct_invalid_json', f'nesting deeper than {MAX_DEPTH}') from None
    except ValueError as e:
        raise CanonicalJsonError('struct_invalid_json', f'invalid JSON: {e}') from None
    if _needs_tree_check(text):
        _check_tree(value, 0)
    return value
