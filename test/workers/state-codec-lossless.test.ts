// The lossless state codec (docs/spec/state-codec.md), TypeScript and Rust against the shared
// hand-derived vectors (test/workers/vectors/state-codec-lossless.json; Python: workers/python/tests/
// test_state_codec_lossless.py): each decodes to its value and encodes to the same bytes; BigInt, -0
// and typed arrays come back as the same types; what cannot be kept is refused naming its path.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { decodeState, encodeState } from '../../workers/state-codec.js';
import { buildRustCli, rustBatch, rustModelsPath, skipReason } from '../cross-lang/rust-cli.js';
import { REPO_ROOT } from './harness.js';

interface Spec {
  int?: string;
  float?: string;
  map?: Record<string, Spec>;
  ndarray?: { dtype: string; shape: number[]; values: number[] };
}
interface Vector {
  name: string;
  hex: string;
  value: Spec;
  reencodes?: string[];
}
const { vectors } = JSON.parse(
  readFileSync(join(REPO_ROOT, 'test/workers/vectors/state-codec-lossless.json'), 'utf8'),
) as { vectors: Vector[] };

const ARRAYS: Record<string, new (values: number[] | bigint[]) => ArrayLike<unknown>> = {
  '<f8': Float64Array,
  '<f4': Float32Array,
  '|b1': Uint8Array,
  '<i8': BigInt64Array as never,
};

/** What TypeScript decodes a vector's value to: BigInt for integers, typed arrays flat. */
function expected(spec: Spec): unknown {
  if (spec.int !== undefined) return BigInt(spec.int);
  if (spec.float !== undefined) return Number(spec.float);
  if (spec.map !== undefined) return Object.fromEntries(Object.entries(spec.map).map(([k, v]) => [k, expected(v)]));
  const { dtype, values } = spec.ndarray!;
  return new ARRAYS[dtype]!(dtype === '<i8' ? values.map(BigInt) : values);
}

describe('the lossless state codec against the hand-derived vectors', () => {
  it.each(vectors)('TypeScript: $name decodes to its value (same type) and encodes to the same bytes', (v) => {
    const value = decodeState(Buffer.from(v.hex, 'hex'));
    expect(value).toStrictEqual(expected(v.value));
    if (v.value.float === '-0.0') expect(Object.is(value, -0)).toBe(true);
    if (v.reencodes === undefined || v.reencodes.includes('typescript'))
      expect(encodeState(value).toString('hex')).toBe(v.hex);
  });

  describe.skipIf(skipReason !== null)('Rust (detsim-models reencode-state)', () => {
    beforeAll(() => buildRustCli());
    it('re-encodes every vector to the same bytes', () => {
      const out = rustBatch(
        vectors.map((v) => ({ op: 'reencode-state', base64: Buffer.from(v.hex, 'hex').toString('base64') })),
        rustModelsPath,
      );
      expect(
        out.map((o) => ('ok' in o ? Buffer.from(o.ok as string, 'base64').toString('hex') : o.error.message)),
      ).toEqual(vectors.map((v) => v.hex));
    });
  });
});

describe('TypeScript state round trips', () => {
  it('BigInt, -0 and every typed array come back as the same values and classes, in memory of their own', () => {
    const state = {
      big: 2n ** 100n,
      small: 5n,
      negative: -(2n ** 64n),
      zero: -0,
      f32: new Float32Array([1.5, -2]),
      f64: new Float64Array([0.1, -0]),
      i8: new Int8Array([-1, 2]),
      u16: new Uint16Array([65535]),
      i16: new Int16Array([-300]),
      u32: new Uint32Array([4294967295]),
      i32: new Int32Array([-5]),
      b64: new BigInt64Array([-(2n ** 63n)]),
      u64: new BigUint64Array([2n ** 64n - 1n]),
      bytes: new Uint8Array([1, 2, 3]),
      number: 2 ** 40,
    };
    const back = decodeState(encodeState(state)) as typeof state;
    // bin comes back as a Uint8Array, not a Buffer (whose slice() is a view, not a copy).
    expect(back).toStrictEqual(state);
    expect(back.bytes.constructor).toBe(Uint8Array);
    const copy = back.bytes.slice();
    copy[0] = 9;
    expect(back.bytes[0]).toBe(1);
    expect(Object.is(back.zero, -0)).toBe(true);
    expect(back.f32.buffer.byteLength).toBe(8);
    expect(encodeState(back).equals(encodeState(state))).toBe(true);
  });

  it('refuses what it cannot keep exactly, naming the path', () => {
    expect(() => encodeState({ a: [new DataView(new ArrayBuffer(2))] })).toThrow(
      'state $.a[0]: a DataView cannot be captured (use one of the typed arrays)',
    );
    expect(() => encodeState({ a: new Uint8ClampedArray(2) })).toThrow(
      'state $.a: a Uint8ClampedArray cannot be captured',
    );
    expect(() => encodeState({ a: NaN })).toThrow('state $.a: NaN is not a finite number');
    expect(() => encodeState({ a: new Map() })).toThrow('state $.a: Map is not plain data');
    // An empty slot (new Array(3), [1, , 3]) would come back as null: refused, naming it.
    // eslint-disable-next-line no-sparse-arrays
    expect(() => encodeState({ a: [1, , 3] })).toThrow(
      'state $.a[1]: an empty slot of a sparse array cannot be captured (fill it, e.g. with null)',
    );
    expect(() => encodeState(new Array(2))).toThrow('state $[0]: an empty slot of a sparse array cannot be captured');
    expect(() => encodeState({ a: [1, undefined] })).toThrow('state $.a[1]: undefined cannot be captured');
  });

  it('refuses what would come back other than it went in: lone surrogates, __proto__, hidden keys, cycles', () => {
    expect(() => encodeState({ s: 'x\uD800y' })).toThrow(
      'state $.s: a string with a lone surrogate cannot be captured (it would come back as U+FFFD)',
    );
    expect(() => encodeState({ k: { 'k\uDC00': 1, 'k\uDC01': 2 } })).toThrow(
      'state $.k (a key): a string with a lone surrogate cannot be captured',
    );
    expect(() => encodeState({ o: JSON.parse('{"__proto__":1,"x":2}') })).toThrow(
      'state $.o: the key __proto__ cannot be captured (it would come back renamed)',
    );
    expect(() => encodeState({ o: { [Symbol.for('k')]: 7 } })).toThrow(
      'state $.o: a Symbol-keyed property cannot be captured (it would be dropped)',
    );
    const hidden = Object.defineProperty({ a: 1 }, 'h', { value: 2, enumerable: false });
    expect(() => encodeState({ o: hidden })).toThrow(
      'state $.o.h: a non-enumerable property cannot be captured (it would be dropped)',
    );
    expect(() => encodeState({ a: Object.assign([1, 2], { total: 3 }) })).toThrow(
      "state $.a.total: a property beside an array's elements cannot be captured",
    );
    const o: Record<string, unknown> = { a: { b: {} } };
    (o.a as { b: Record<string, unknown> }).b.up = o.a;
    expect(() => encodeState(o)).toThrow('state $.a.b.up: a cycle (it is $.a), which cannot be captured');
    // The same object twice, not in a cycle, is plain data (it comes back as two equal copies).
    const shared = [1];
    expect(decodeState(encodeState({ a: shared, b: shared }))).toStrictEqual({ a: [1], b: [1] });
  });

  it('a control: msgpackr alone writes -0 as the int 0 (what the codec would lose without its marker)', async () => {
    const { Packr } = await import('msgpackr');
    expect(Buffer.from(new Packr({ useRecords: false }).pack(-0)).toString('hex')).toBe('00');
    expect(encodeState(-0).toString('hex')).toBe('cb8000000000000000');
  });
});
