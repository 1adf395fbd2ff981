// RFC 8785: the official JCS vectors (a copy in fixtures/jcs/rfc8785/, checked against its
// SHA256SUMS; never skipped), detsim's own strict-parser cases (fixtures/jcs/strict-cases.json),
// and an oracle check against the `canonicalize` package on random values.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import oracle from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  canonicalBytes,
  canonicalDigest,
  canonicalize,
  parseCanonical,
  parseStrict,
  serializeNumber,
  sha256Hex,
} from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { refusal } from '../refusal.js';
import { jsonValue } from './json-arbitrary.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const JCS_DIR = `${repoRoot}fixtures/jcs/rfc8785/`;
const JCS_NAMES = ['arrays', 'french', 'structures', 'unicode', 'values', 'weird'];

describe('official JCS vectors (fixtures/jcs/rfc8785, cyberphone/json-canonicalization)', () => {
  it('every vector file is the upstream copy: SHA256SUMS matches, 19 files', () => {
    const sums = readFileSync(`${JCS_DIR}SHA256SUMS`, 'utf8').split('\n').filter(Boolean);
    expect(sums).toHaveLength(19);
    for (const line of sums) {
      const [digest, name] = line.split(/\s+/) as [string, string];
      expect(
        createHash('sha256')
          .update(readFileSync(`${JCS_DIR}${name}`))
          .digest('hex'),
        name,
      ).toBe(digest);
    }
  });

  for (const name of JCS_NAMES) {
    it(`${name}: input canonicalizes to output, byte for byte`, () => {
      const input = readFileSync(`${JCS_DIR}input/${name}.json`);
      const expected = readFileSync(`${JCS_DIR}output/${name}.json`);
      const hex = readFileSync(`${JCS_DIR}outhex/${name}.txt`, 'utf8').trim().split(/\s+/).join('');
      const out = canonicalBytes(parseStrict(input));
      expect(out.toString('hex')).toBe(expected.toString('hex'));
      expect(out.toString('hex')).toBe(hex);
      // The output is a fixed point: already canonical.
      expect(canonicalBytes(parseCanonical(expected)).equals(expected)).toBe(true);
    });
  }

  it('es6testfile100m-first10000.txt: all 10,000 numbers print exactly', () => {
    const lines = readFileSync(`${JCS_DIR}es6testfile100m-first10000.txt`, 'utf8')
      .split('\n')
      .filter((l) => l !== '');
    expect(lines).toHaveLength(10000);
    const bits = Buffer.alloc(8);
    const failures: string[] = [];
    for (const line of lines) {
      const comma = line.indexOf(',');
      bits.writeBigUInt64BE(BigInt(`0x${line.slice(0, comma)}`));
      const value = bits.readDoubleBE(0);
      const got = serializeNumber(value);
      if (got !== line.slice(comma + 1)) failures.push(`${line} → ${got}`);
    }
    expect(failures.slice(0, 10)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

interface Nest {
  open: string;
  close: string;
  depth: number;
  inner: string;
}
interface Cases {
  refuse: { name: string; input?: string; inputHex?: string; nest?: Nest; reason: string }[];
  canonical: { name: string; input?: string; output?: string; nest?: Nest; reparse?: boolean }[];
  writeRefuse: { name: string; value: string; reason: string }[];
  writeAccept: { name: string; value: string; output: string }[];
}
const cases = JSON.parse(readFileSync(`${repoRoot}fixtures/jcs/strict-cases.json`, 'utf8')) as Cases;
const nested = (n: Nest): string => n.open.repeat(n.depth) + n.inner + n.close.repeat(n.depth);

function inMemoryValue(name: string): unknown {
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  let deep: unknown = 0;
  for (let i = 0; i < 513; i++) deep = [deep];
  const values: Record<string, unknown> = {
    NaN: [NaN],
    Infinity: Infinity,
    '-Infinity': { a: -Infinity },
    undefined: { a: undefined },
    bigint: { n: 1n },
    function: [() => 1],
    Map: { m: new Map() },
    loneSurrogateString: ['\ud800'],
    loneSurrogateKey: { '\udc00': 1 },
    cycle,
    deep,
    '2^60': 2 ** 60,
    '-0': -0,
    '1e21': 1e21,
  };
  if (!(name in values)) throw new Error(`strict-cases.json names an unknown in-memory value ${name}`);
  return values[name];
}

describe('detsim strict-parser cases (fixtures/jcs/strict-cases.json)', () => {
  it('covers every category the issue names', () => {
    const names = cases.refuse.map((c) => c.name).join('\n');
    for (const word of [
      'duplicate key at depth',
      'UTF-8',
      'NaN',
      'Infinity',
      'trailing',
      'raw',
      'lone',
      'byte-order mark',
      'nested 513',
    ]) {
      expect(names).toContain(word);
    }
  });

  for (const c of cases.refuse) {
    it(`refuses ${c.name}`, () => {
      const input = c.inputHex !== undefined ? Buffer.from(c.inputHex, 'hex') : c.nest ? nested(c.nest) : c.input!;
      const e = refusal(() => parseStrict(input));
      expect(e.reason).toBe(c.reason);
      // Text input goes through the same parser as bytes: refuse both ways when it is valid UTF-8.
      if (c.inputHex === undefined && c.reason !== 'struct_invalid_utf8') {
        expect(refusal(() => parseStrict(Buffer.from(input as string, 'utf8'))).reason).toBe(c.reason);
      }
    });
  }

  for (const c of cases.canonical) {
    it(`accepts ${c.name}`, () => {
      const input = c.nest ? nested(c.nest) : c.input!;
      const output = c.nest ? input : c.output!;
      expect(canonicalize(parseStrict(input))).toBe(output);
      expect(canonicalize(parseStrict(Buffer.from(input, 'utf8')))).toBe(output);
      if (c.reparse === false)
        expect(refusal(() => parseCanonical(Buffer.from(output, 'utf8'))).reason).toBe('struct_unsafe_integer');
      else expect(canonicalBytes(parseCanonical(Buffer.from(output, 'utf8'))).toString('utf8')).toBe(output);
    });
  }

  for (const c of cases.writeRefuse) {
    it(`canonicalize refuses ${c.name}`, () => {
      expect(refusal(() => canonicalize(inMemoryValue(c.value))).reason).toBe(c.reason);
    });
  }

  for (const c of cases.writeAccept) {
    it(`canonicalize writes ${c.name}`, () => expect(canonicalize(inMemoryValue(c.value))).toBe(c.output));
  }
});

describe('canonical JSON API', () => {
  it('parseStrict keeps keys with prototype-like names as plain data', () => {
    const v = parseStrict('{"__proto__":{"polluted":true},"constructor":1}') as Record<string, unknown>;
    expect(Object.keys(v)).toEqual(['__proto__', 'constructor']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
  it('parseCanonical refuses non-canonical bytes (key order, whitespace, number form)', () => {
    for (const text of ['{"b":1,"a":2}', '{"a": 1}', '[1.0]', '["\\u00e9"]', '[1e+30 ]']) {
      expect(refusal(() => parseCanonical(Buffer.from(text))).reason).toBe('struct_not_canonical');
    }
  });
  it('canonicalDigest is the SHA-256 of the canonical bytes', () => {
    const value = { b: [1, 'x'], a: null };
    expect(canonicalDigest(value)).toBe(sha256Hex(Buffer.from('{"a":null,"b":[1,"x"]}')));
    // Independent value: SHA-256 of "{}" as published by every sha256 tool.
    expect(canonicalDigest({})).toBe('44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a');
  });
  it('serializeNumber refuses non-finite numbers', () => {
    for (const n of [NaN, Infinity, -Infinity])
      expect(refusal(() => serializeNumber(n)).reason).toBe('struct_non_finite_number');
  });
});

describe('canonicalize against the `canonicalize` package (oracle)', () => {
  const json = jsonValue;
  it('gives the same text for random JSON values, and parse(canonical) is a fixed point', () => {
    fc.assert(
      fc.property(json, (v) => {
        const text = canonicalize(v);
        expect(text).toBe(oracle(v));
        try {
          expect(canonicalize(parseCanonical(Buffer.from(text)))).toBe(text);
        } catch (e) {
          // Integral doubles beyond 2^53-1 print as integer literals, which the parser refuses by design.
          if (!(e instanceof DetsimError && e.reason === 'struct_unsafe_integer')) throw e;
        }
      }),
      { numRuns: 300 },
    );
  });
});
