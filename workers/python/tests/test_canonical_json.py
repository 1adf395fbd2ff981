# The Python canonical JSON against the RFC 8785 vectors in fixtures/jcs (the official JCS files,
# checked against their SHA256SUMS first, and 10,000 ES6 numbers) and detsim's own strict cases.
# Not the TypeScript implementation's tests (test/formats/canonical-json.test.ts).
import hashlib
import json
import struct
from pathlib import Path

import pytest
from detsim_worker.canonical_json import CanonicalJsonError, canonicalize, format_number, parse_strict

REPO_ROOT = Path(__file__).resolve().parents[3]

JCS = REPO_ROOT / 'fixtures' / 'jcs' / 'rfc8785'
CASES = ['arrays', 'french', 'structures', 'unicode', 'values', 'weird']
STRICT = json.loads((REPO_ROOT / 'fixtures' / 'jcs' / 'strict-cases.json').read_text('utf-8'))


def test_vector_files_match_their_sha256sums():
    for line in (JCS / 'SHA256SUMS').read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        assert hashlib.sha256((JCS / name.lstrip('*')).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize('case', CASES)
def test_official_vector(case):
    value = parse_strict((JCS / 'input' / f'{case}.json').read_bytes())
    expected = (JCS / 'output' / f'{case}.json').read_bytes()
    assert canonicalize(value).encode('utf-8') == expected
    hexed = bytes.fromhex((JCS / 'outhex' / f'{case}.txt').read_text().replace(' ', '').replace('\n', ''))
    assert canonicalize(value).encode('utf-8') == hexed


def test_es6_numbers_first_10000():
    lines = [x for x in (JCS / 'es6testfile100m-first10000.txt').read_text().split('\n') if x]
    assert len(lines) == 10_000
    for line in lines:
        bits, expected = line.split(',')
        value = struct.unpack('>d', bytes.fromhex(bits.rjust(16, '0')))[0]
        assert format_number(value) == expected, line


def _input_of(case):
    if 'inputHex' in case:
        return bytes.fromhex(case['inputHex'])
    if 'nest' in case:
        n = case['nest']
        return n['open'] * n['depth'] + n['inner'] + n['close'] * n['depth']
    return case['input']


@pytest.mark.parametrize('case', STRICT['canonical'], ids=lambda c: c.get('name', str(c)[:40]))
def test_strict_canonical(case):
    text = _input_of(case)
    expected = case.get('output', text)
    assert canonicalize(parse_strict(text)) == expected


@pytest.mark.parametrize('case', STRICT['refuse'], ids=lambda c: c.get('name', str(c)[:40]))
def test_strict_refuse(case):
    with pytest.raises(CanonicalJsonError):
        parse_strict(_input_of(case))


@pytest.mark.parametrize('literal', ['9007199254740992', '-9007199254740992', '1234567890123456789012345', '9' * 5000])
def test_an_unsafe_integer_literal_is_refused_as_typescript_and_rust_refuse_it(literal):
    # The same literal inside a string and a key first: the offset is the number's, in UTF-16 units.
    with pytest.raises(CanonicalJsonError) as e:
        parse_strict(f'{{"é{literal}":"{literal}","n":[1.5,{literal}]}}'.encode())
    offset = 2 * len(literal) + 17  # what the TypeScript parser reports for this text
    if len(literal) < 309:
        assert e.value.reason == 'struct_unsafe_integer'
        assert (
            str(e.value) == f'integer {literal} is beyond ±(2^53−1); write counters as U64 strings at offset {offset}'
        )
    else:  # beyond a double: TypeScript and Rust call it out of range
        assert e.value.reason == 'struct_invalid_json'
        assert str(e.value) == f'number {literal} is out of range at offset {offset}'


def test_the_largest_safe_integers_parse():
    assert parse_strict(b'[9007199254740991,-9007199254740991,0]') == [9007199254740991, -9007199254740991, 0]


def test_a_numpy_float64_is_written_as_the_float_it_is():
    # numpy's float64 is a float subclass whose repr is "np.float64(…)": the writer printed that
    # into decisions, observations and world digests (not JSON, and hashed as such).
    np = pytest.importorskip('numpy')
    for x in [0.25, 0.1 + 0.2, -1.5e-7, 1e21, 123456789.0, 3.0, -0.0, 5e-324]:
        assert canonicalize({'a': np.float64(x)}) == canonicalize({'a': x}), x
        assert format_number(np.float64(x)) == format_number(x)
    assert canonicalize([np.float64(0.25), np.float64(2.0)]) == '[0.25,2]'


def test_an_int_subclass_is_written_as_its_digits():
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    assert canonicalize({'level': Level.HIGH}) == '{"level":3}'
