// canonicalize's fast path (JSON.stringify for data already in canonical shape, e.g. a parsed
// canonical body) against its own writer and the `canonicalize` package, and the cases that must
// leave the fast path so refusals stay the writer's. Not the JCS vectors (canonical-json.test.ts).
import oracle from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalDigest, canonicalize, isCanonicalText, sha256Hex } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { decodeBody } from '../../core/protocol/body-codec.js';
import { jsonValue } from './json-arbitrary.js';

/** The same value with every object's keys inserted in reverse order (forces the writer). */
function reversedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reversedKeys);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).reverse()) out[k] = reversedKeys((v as Record<string, unknown>)[k]);
  return out;
}

function refusalOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof DetsimError) return e.reason;
    throw e;
  }
  throw new Error('accepted');
}

describe('canonicalize fast path', () => {
  const json = jsonValue;

  it('a parsed canonical text (fast path) and the same data with unsorted keys (writer) print the oracle text', () => {
    fc.assert(
      fc.property(json, (v) => {
        const text = oracle(v)!;
        const parsed = JSON.parse(text) as unknown;
        expect(canonicalize(parsed)).toBe(text);
        expect(canonicalize(reversedKeys(parsed))).toBe(text);
        expect(canonicalDigest(parsed)).toBe(sha256Hex(Buffer.from(text, 'utf8')));
      }),
      { numRuns: 400 },
    );
  });

  it('integer-like keys, -0 and escapes print in RFC 8785 order and form', () => {
    const v = JSON.parse('{"10":1,"9":2,"a":-0,"b":"\\u0007\\"\\\\x","c":[1e21,0.1]}') as unknown;
    expect(canonicalize(v)).toBe(oracle(v));
  });

  it('sorted data that is not JSON still takes the writer and is refused with its reason', () => {
    expect(refusalOf(() => canonicalize({ a: 1, b: Number.NaN }))).toBe('struct_non_finite_number');
    expect(refusalOf(() => canonicalize({ a: undefined }))).toBe('struct_unsupported_value');
    expect(refusalOf(() => canonicalize({ a: ['\ud800'] }))).toBe('struct_invalid_json');
    expect(refusalOf(() => canonicalize({ a: new Date(0) }))).toBe('struct_unsupported_value');
    expect(refusalOf(() => canonicalize([1, , 3]))).toBe('struct_unsupported_value'); // eslint-disable-line no-sparse-arrays
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.b = cycle;
    expect(refusalOf(() => canonicalize(cycle))).toBe('struct_invalid_json');
  });

  it('decodeBody accepts canonical bytes and refuses a body that differs only in invalid UTF-8', () => {
    const body = Buffer.from('{"a":"x","b":[1,2]}', 'utf8');
    expect(decodeBody(body)).toEqual({ a: 'x', b: [1, 2] });
    // 0xff decodes to U+FFFD: the text compare alone would not see it; the bytes do.
    const bad = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    expect(() => decodeBody(bad)).toThrow(DetsimError);
    // A real U+FFFD in a canonical body is fine.
    expect(decodeBody(Buffer.from('{"a":"\ufffd"}', 'utf8'))).toEqual({ a: '\ufffd' });
  });

  it('isCanonicalText proves the canonical texts of random values', () => {
    fc.assert(
      fc.property(json, (v) => {
        const text = oracle(v)!;
        // Only escaped keys and U+FFFD are left to the exact path.
        const escapedKey = /"(?:[^"\\]|\\.)*\\.(?:[^"\\]|\\.)*":/.test(text);
        if (!escapedKey && !text.includes('\ufffd')) expect(isCanonicalText(text)).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it('isCanonicalText never proves a text that is not exactly canonicalize(JSON.parse(text))', () => {
    const exact = (t: string): boolean => {
      try {
        return canonicalize(JSON.parse(t)) === t;
      } catch {
        return false;
      }
    };
    // Canonical texts with one edit (a character inserted, removed or replaced), and short random texts.
    const edited = fc
      .tuple(json, fc.nat(), fc.constantFrom('', ' ', '"', '\\', ',', ':', '0', '-', '.', 'e', '}', ']', 'a', '\ud800'))
      .map(([v, at, ch]) => {
        const t = oracle(v)!;
        const i = t.length === 0 ? 0 : at % t.length;
        return at % 3 === 0 ? t.slice(0, i) + ch + t.slice(i) : t.slice(0, i) + ch + t.slice(i + 1);
      });
    const random = fc.string({ unit: fc.constantFrom(...'{}[]",:-.0159eE+ab\\u'.split('')), maxLength: 16 });
    fc.assert(
      fc.property(fc.oneof(edited, random), (t) => {
        if (isCanonicalText(t)) expect(exact(t)).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it('isCanonicalText: the forms canonical JSON prints, and near misses', () => {
    const yes = ['{"10":1,"9":2}', '"\\u0007\\b\\"\\\\"', '1e+21', '0.1', '-5', '"\ud83d\ude00"', '[]', '{}', 'null'];
    for (const t of yes) expect([t, isCanonicalText(t)]).toEqual([t, true]);
    const no = [
      '{"b":1,"a":2}',
      '{"a": 1}',
      '{"a":1.0}',
      '{"a":1,"a":1}',
      '{"a":9007199254740993}',
      '{"a":"\\ud800"}',
      '"\ud800"',
      '-0',
      '01',
      '1e400',
      '1E+21',
      '"\\/"',
      '"\\u001F"',
      '"\\u0008"',
      '"\\u0041"',
      '{"a":1}x',
      '\ufeff{}',
      '',
      '[1,]',
      '{"a":1,}',
      'tru',
    ];
    for (const t of no) expect([t, isCanonicalText(t)]).toEqual([t, false]);
  });
});
