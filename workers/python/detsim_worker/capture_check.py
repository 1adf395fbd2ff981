# The exactness check of a user model's capture (docs/spec/state-codec.md): the captured state is
# encoded, decoded and handed to the model's own restore as a scratch copy; the copy must equal the
# live state, compared as data (dicts, lists, numpy arrays by dtype/shape/values, numpy Generators by
# their bit generator's state, other objects by their attributes), and capturing the copy again must
# give the same bytes. Else the capture fails naming the participant and the first differing path (a
# capture that drops a field restore needs, such as a Generator's has_uint32; a 128-bit int turned
# into a float; a restore that rebuilds a value differently). Run on every capture of a user model in
# strict mode (the live comparison looks into any object the state holds, a library's too, so it is
# opt-in); built-in models skip it; check_model (testing.py) runs the same comparison. Not the codec
# (state_codec.py, exact by itself) and not the protocol; exact_capture makes the refusal.
from __future__ import annotations

from typing import Any, Callable

from .model_call import call_model
from .protocol import ProtocolRefusal
from .state_codec import StateCodecError, decode_state, encode_state


class CaptureNotExact(ValueError):
    pass


def first_difference(a: Any, b: Any, path: str = '$') -> str | None:
    """The path of the first place two decoded states differ (keys in sorted order), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f'{path}.{key}'
            found = first_difference(a[key], b[key], f'{path}.{key}')
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f'{path}[{i}]')
            if found:
                return found
        return None
    return None if encode_state(a) == encode_state(b) else path


def shown(value: Any) -> str:
    """A short, exact text of a decoded value for an error message."""
    text = f'<{len(value)} bytes>' if isinstance(value, (bytes, bytearray)) else repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


def restore_hint(live: Any, restored: Any) -> str:
    """What to do about a live value that came back as `restored`: the advice of every refusal of it."""
    if isinstance(live, float) and isinstance(restored, int) and not isinstance(restored, bool):
        return 'a float with an integral value comes back as an int: rebuild it with float() in restore'
    return 'capture must return everything restore needs, exactly'


def live_difference(a: Any, b: Any, path: str = '$', depth: int = 0) -> tuple[str, Any, Any] | None:
    """The first place where two live model states differ as data: (path, a's value, b's value), or None.
    Objects it cannot look into (no attributes) are not compared."""
    if depth > 64:
        return None
    if type(a) is not type(b) and not (_is_number(a) and _is_number(b)):
        return (path, type(a).__name__, type(b).__name__)
    if _is_number(a):
        # An int where a float was is a difference (3 // 2 is not 3.0 // 2 in effect, nor its repr).
        same = (
            a == b and isinstance(a, float) == isinstance(b, float) and (not isinstance(a, float) or str(a) == str(b))
        )
        return None if same else (path, a, b)
    if isinstance(a, (str, bytes, bytearray, bool)) or a is None:
        return None if a == b else (path, a, b)
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return (f'{path}.{key}', a.get(key, '<missing>'), b.get(key, '<missing>'))
            found = live_difference(a[key], b[key], f'{path}.{key}', depth + 1)
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return (f'{path}.length', len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            found = live_difference(x, y, f'{path}[{i}]', depth + 1)
            if found:
                return found
        return None
    return _object_difference(a, b, path, depth)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _bits(bit_generator: Any) -> dict:
    """A bit generator's state; a buffered half word (PCG64's uinteger) counts only while has_uint32 is set."""
    state = dict(bit_generator.state)
    if state.get('has_uint32') == 0 and 'uinteger' in state:
        state['uinteger'] = 0
    return state


def _object_difference(a: Any, b: Any, path: str, depth: int) -> tuple[str, Any, Any] | None:
    module = type(a).__module__ or ''
    if module.startswith('numpy'):
        import numpy as np

        if isinstance(a, np.ndarray):
            same = a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in 'fc')
            return None if same else (path, f'{a.dtype}{list(a.shape)} {a!r}', f'{b.dtype}{list(b.shape)} {b!r}')
        if isinstance(a, np.random.Generator):
            return live_difference(
                _bits(a.bit_generator), _bits(b.bit_generator), f'{path}.bit_generator.state', depth + 1
            )
        if isinstance(a, np.random.BitGenerator):
            return live_difference(_bits(a), _bits(b), f'{path}.state', depth + 1)
        if isinstance(a, np.generic):
            return None if a == b else (path, a, b)
    attrs = getattr(a, '__dict__', None)
    slots = [n for c in type(a).__mro__ for n in getattr(c, '__slots__', ())]
    fields = dict(attrs or {})
    fields.update({n: getattr(a, n) for n in slots if hasattr(a, n)})
    other = dict(getattr(b, '__dict__', None) or {})
    other.update({n: getattr(b, n) for n in slots if hasattr(b, n)})
    return live_difference(fields, other, path, depth) if fields or other else None


def check_exact(state: Any, restore: Callable[[Any], Any], capture: Callable[[Any], Any], live: Any = None) -> None:
    """Raise CaptureNotExact when the state restored from `state` (as the payload holds it) differs from
    the live state `live` as data, or captures again differently."""
    data = encode_state(state)
    held = decode_state(data)
    copy = restore(decode_state(data))
    if live is not None:
        found = live_difference(live, copy)
        if found:
            where, was, now = found
            raise CaptureNotExact(
                f'state {where} differs after a restore: {shown(was)} live, {shown(now)} restored '
                f'({restore_hint(was, now)})'
            )
    again = encode_state(capture(copy))
    if again == data:
        return
    other = decode_state(again)
    where = first_difference(held, other) or '$'
    detail = ''
    try:
        detail = f': {shown(_at(held, where))} captured, {shown(_at(other, where))} after a restore'
    except (KeyError, IndexError, TypeError):
        pass
    raise CaptureNotExact(
        f'state {where} does not survive restore{detail} (capture must return everything restore needs, exactly)'
    )


def exact_capture(model: Any, state: Any, ctx: Any, strict: bool, who: str, live: Any = None) -> None:
    """check_exact for a hosted model: any failure is the capture's BACKEND_FAILURE refusal naming `who`."""

    def restore(data: Any) -> Any:
        return call_model(strict, who, 'restore (capture check)', 'none', lambda: model.restore(data, ctx))

    def capture(restored: Any) -> Any:
        return call_model(strict, who, 'capture (capture check)', 'none', lambda: model.capture(restored))

    try:
        check_exact(state, restore, capture, live)
    except StateCodecError as e:
        raise ProtocolRefusal('BACKEND_FAILURE', f'{who}: capture state cannot be encoded: {e}', 'none') from None
    except CaptureNotExact as e:
        raise ProtocolRefusal('BACKEND_FAILURE', f'{who}: capture is not exact: {e}', 'none') from None


def _at(value: Any, path: str) -> Any:
    import re

    for key, index in re.findall(r'\.([^.\[]+)|\[(\d+)\]', path[1:]):
        value = value[key] if key else value[int(index)]
    return value
