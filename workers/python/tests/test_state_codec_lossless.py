# The lossless state codec (docs/spec/state-codec.md): the shared hand-derived vectors decode to their
# values and encode to the same bytes; a numpy Generator's 128-bit state survives capture exactly
# (and the old float conversion is shown to break it); arrays keep dtype and shape and come back
# writable; values the codec cannot keep are refused naming their path.
import json
import math
import pathlib

import numpy as np
import pytest
from detsim_worker.state_codec import StateCodecError, decode_state, encode_state

VECTORS = json.loads((pathlib.Path(__file__).parents[3] / 'test/workers/vectors/state-codec-lossless.json').read_text())


def expected(spec):
    if 'int' in spec:
        return int(spec['int'])
    if 'float' in spec:
        return float(spec['float'])
    if 'map' in spec:
        return {k: expected(v) for k, v in spec['map'].items()}
    nd = spec['ndarray']
    return np.array(nd['values'], dtype=nd['dtype']).reshape(nd['shape'])


def same(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return type(b) is float and a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize('vector', VECTORS['vectors'], ids=lambda v: v['name'])
def test_vector_decodes_to_its_value_and_encodes_to_the_same_bytes(vector):
    data = bytes.fromhex(vector['hex'])
    value = decode_state(data)
    assert same(expected(vector['value']), value)
    assert encode_state(value).hex() == vector['hex']


def _draw(gen, n=64):
    # uint32 draws use the half-word buffer: has_uint32 / uinteger change between draws.
    return [int(gen.integers(0, 2**32, dtype=np.uint32)) for _ in range(n)] + list(gen.random(8))


def test_a_numpy_generator_state_survives_capture_exactly():
    gen = np.random.default_rng(2026)
    _draw(gen, 7)
    state = decode_state(encode_state(gen.bit_generator.state))
    copy = np.random.Generator(np.random.PCG64())
    copy.bit_generator.state = state
    assert _draw(copy, 1000) == _draw(gen, 1000)


def test_control_the_old_float_conversion_of_wide_ints_loses_the_generator():
    gen = np.random.default_rng(2026)
    state = gen.bit_generator.state
    lossy = {**state, 'state': {k: float(v) for k, v in state['state'].items()}}
    copy = np.random.Generator(np.random.PCG64())
    copy.bit_generator.state = {**lossy, 'state': {k: int(v) for k, v in lossy['state'].items()}}
    assert _draw(copy, 16) != _draw(gen, 16)


def test_arrays_keep_dtype_and_shape_and_come_back_writable():
    for array in (
        np.arange(12, dtype='>i4').reshape(3, 4),
        np.zeros((2, 0)),
        np.array(7.5),
        np.arange(6)[::2],
        np.array([True, False, True]),
        np.arange(4, dtype=np.uint16),
    ):
        back = decode_state(encode_state({'a': array}))['a']
        assert back.dtype == array.dtype.newbyteorder('<') and back.shape == array.shape
        assert np.array_equal(back, array) and back.flags.writeable
        back[...] = 0  # writable in place


def test_negative_zero_wide_ints_and_numpy_scalars_round_trip():
    value = {'z': -0.0, 'big': -(2**200), 'u': 2**63, 'f': np.float64(0.1), 'i': np.int64(-3), 'b': np.bool_(True)}
    back = decode_state(encode_state(value))
    assert math.copysign(1, back['z']) == -1 and back['big'] == -(2**200) and back['u'] == 2**63
    assert back['f'] == 0.1 and back['i'] == -3 and back['b'] is True


def _cycle() -> dict:
    o: dict = {}
    o['self'] = o
    return {'o': o}


@pytest.mark.parametrize(
    'value, path',
    [
        ({'a': {1, 2}}, r'state \$\.a: set cannot be captured exactly'),
        ({'a': [np.float32(0.1)]}, r'state \$\.a\[0\]: a numpy float32 scalar cannot be captured exactly'),
        ({'a': np.array(['x'], dtype=object)}, r'state \$\.a: a numpy array of dtype object cannot be captured'),
        ({'a': 2**70000}, r'state \$\.a: an integer of 70001 bits is too large to capture'),
        ({'a': float('nan')}, r'state \$\.a: NaN is not a finite number'),
        # Would come back as another type: a tuple as a list (unequal, unhashable), a bytearray as bytes.
        ({'a': [(1, 2)]}, r'state \$\.a\[0\]: a tuple would come back as a list \(capture list\(\.\.\.\) and'),
        ({'a': bytearray(b'x')}, r'state \$\.a: a bytearray would come back as bytes \(capture bytes\(\.\.\.\) and'),
        ({'a': memoryview(b'x')}, r'state \$\.a: a memoryview would come back as bytes'),
        # Each was an INTERNAL error (no path) before: an int key, a lone surrogate, a cycle.
        ({'m': {1: 10}}, r'state \$\.m: key 1 is not a string \(a key of type int would come back as a string\)'),
        ({'s': 'x\ud800y'}, r'state \$\.s: a string with a lone surrogate cannot be captured'),
        ({'k': {'k\udc00': 1}}, r'state \$\.k \(a key\): a string with a lone surrogate'),
        (_cycle(), r'state \$\.o\.self: a cycle \(it is \$\.o\), which cannot be captured'),
    ],
)
def test_what_cannot_be_kept_exactly_is_refused_naming_its_path(value, path):
    with pytest.raises(StateCodecError, match=path):
        encode_state(value)
