// canonicalCopy: the snapshot an inline worker's reply crosses as (link.ts ReplyValue) must be
// exactly what printing and parsing would give — equal to JSON.parse(canonicalize(v)), printed by
// canonicalize to the same text, never sharing an object with the source — and it must decline
// (undefined: the caller prints instead) everything printing would refuse or the strict parser
// would not read back the same. Not canonicalize itself (canonical-fast-path.test.ts).
import oracle from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalCopy, canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { jsonValue } from './json-arbitrary.js';

/** The same value with every object's keys inserted in reverse order. */
function reversedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reversedKeys);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).reverse())
    Object.defineProperty(out, k, {
      value: reversedKeys((v as Record<string, unknown>)[k]),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return out;
}

/** Whether any object or array of `a` is also reachable in `b`. */
function shares(a: unknown, b: unknown): boolean {
  const seen = new Set<unknown>();
  const walk = (v: unknown, visit: (o: object) => boolean): boolean => {
    if (v === null || typeof v !== 'object') return false;
    if (visit(v)) return true;
    return Object.values(v).some((x) => walk(x, visit));
  };
  walk(a, (o) => (seen.add(o), false));
  return walk(b, (o) => seen.has(o));
}

function readsBack(text: string): boolean {
  try {
    parseStrict(Buffer.from(text, 'utf8'));
    return true;
  } catch {
    return false;
  }
}

describe('canonicalCopy', () => {
  it('equals JSON.parse of the canonical text, prints to that text, shares nothing; declines what the strict parser refuses', () => {
    fc.assert(
      fc.property(jsonValue, (parsed) => {
        const v = reversedKeys(parsed);
        const text = oracle(v)!;
        const copy = canonicalCopy(v);
        // An integer beyond 2^53 prints, but the strict parser refuses it: the copy declines it too.
        if (!readsBack(text)) {
          expect(copy).toBeUndefined();
          return;
        }
        expect(copy).toStrictEqual(JSON.parse(text));
        expect(canonicalize(copy)).toBe(text);
        expect(shares(v, copy)).toBe(false);
      }),
      { numRuns: 400 },
    );
  });

  it('normalizes -0, keeps 1e21 and -(2^53 - 1), sorts keys, keeps an own "__proto__" as data', () => {
    const copy = canonicalCopy({ z: -0, a: [1e21, -(2 ** 53 - 1)], m: JSON.parse('{"__proto__":{"x":1}}') as unknown });
    expect(JSON.stringify(copy)).toBe('{"a":[1e+21,-9007199254740991],"m":{"__proto__":{"x":1}},"z":0}');
    expect(Object.is((copy as { z: number }).z, 0)).toBe(true);
    expect(Object.getPrototypeOf((copy as { m: object }).m)).toBe(Object.prototype);
  });

  it('declines what printing refuses or the strict parser would not read back', () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.b = cycle;
    class Point {
      x = 1;
    }
    for (const bad of [
      Number.NaN,
      Number.POSITIVE_INFINITY,
      undefined,
      { a: undefined },
      [1, , 3], // eslint-disable-line no-sparse-arrays
      '\ud800',
      { ['\udc00']: 1 },
      2 ** 53,
      -(2 ** 60),
      new Date(0),
      new Map(),
      new Uint8Array(2),
      new Point(),
      () => 1,
      10n,
      Symbol('s'),
      cycle,
    ])
      expect(canonicalCopy(bad), String(typeof bad)).toBeUndefined();
  });
});
