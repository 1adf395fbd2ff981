// RFC 8785 across languages: random JSON texts (valid, mutated, escaped, numeric) parsed and
// canonicalized by TypeScript and by the Rust crate (crates-bridge detsim-formats) must give the
// same bytes, or the same refusal (reason code and message). Not the JCS vectors (those run per language).
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { buildRustCli, rustBatch, rustCommand, skipReason, tsOutcome, type Outcome } from './rust-cli.js';

const tsCanonical = (bytes: Uint8Array): Outcome<string> => tsOutcome(() => canonicalize(parseStrict(bytes)));

/** Rust outcomes with the canonical bytes decoded to text, comparable with tsCanonical. */
function rustCanonical(inputs: Uint8Array[]): Outcome<string>[] {
  const out = rustBatch<string>(inputs.map((b) => ({ op: 'canonicalize', base64: Buffer.from(b).toString('base64') })));
  return out.map((o) => ('ok' in o ? { ok: Buffer.from(o.ok, 'base64').toString('utf8') } : o));
}

/** Totals over a whole property, so a test can require that both outcomes occurred. */
interface Seen {
  accepted: number;
  refused: number;
}

function expectSameOutcomes(inputs: Uint8Array[], seen: Seen = { accepted: 0, refused: 0 }): { accepted: number } {
  const rust = rustCanonical(inputs);
  let accepted = 0;
  inputs.forEach((bytes, i) => {
    const ts = tsCanonical(bytes);
    if ('ok' in ts) accepted++;
    expect(rust[i], `input ${JSON.stringify(Buffer.from(bytes).toString('latin1'))}`).toEqual(ts);
  });
  seen.accepted += accepted;
  seen.refused += inputs.length - accepted;
  return { accepted };
}

/**
 * Agreement alone passes when both languages accept (or refuse) everything the same way: each
 * property below must also have met both outcomes a fair number of times.
 */
function expectBothOutcomes(seen: Seen): void {
  expect(seen.accepted, 'inputs accepted by both').toBeGreaterThan(20);
  expect(seen.refused, 'inputs refused by both').toBeGreaterThan(20);
}

const utf8 = (s: string): Uint8Array => Buffer.from(s, 'utf8');
const json = fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' });

/** Edits that make JSON text interesting: structural characters, escapes, control and invalid bytes. */
const edit = fc.oneof(
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('insert' as const),
    at: fc.nat(),
    bytes: fc.constantFrom(
      ...[
        '{',
        '}',
        '[',
        ']',
        '"',
        ',',
        ':',
        '\\',
        '\\u',
        '\\ud800',
        '\\udc00',
        '0',
        '-',
        '.',
        'e',
        'E+',
        '9'.repeat(17),
        ' ',
        '\n',
        '\u0001',
        '\u007f',
        'é',
        '😂',
        'true',
        'nul',
      ].map((s) => [...utf8(s)]),
      [0xff],
      [0xc0, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xef, 0xbb, 0xbf],
    ),
  }),
);

function applyEdits(text: string, edits: { kind: 'delete' | 'insert'; at: number; bytes?: number[] }[]): Uint8Array {
  const bytes = [...utf8(text)];
  for (const e of edits) {
    const at = bytes.length === 0 ? 0 : e.at % (bytes.length + 1);
    if (e.kind === 'delete') bytes.splice(at, 1);
    else bytes.splice(at, 0, ...e.bytes!);
  }
  return Uint8Array.from(bytes);
}

describe.skipIf(skipReason !== null)('canonical JSON: TypeScript and Rust agree', () => {
  beforeAll(() => buildRustCli(), 600_000);

  it('random JSON values, compact and pretty, canonicalize to the same bytes', () => {
    fc.assert(
      fc.property(fc.array(json, { minLength: 20, maxLength: 40 }), (values) => {
        const inputs = values.flatMap((v) => [utf8(JSON.stringify(v)), utf8(JSON.stringify(v, null, 2) ?? 'null')]);
        const { accepted } = expectSameOutcomes(inputs);
        // fast-check's doubles include integers beyond 2^53, which both parsers refuse; most are valid.
        expect(accepted).toBeGreaterThan(inputs.length / 2);
      }),
      { numRuns: 15 },
    );
  });

  it('mutated JSON texts are accepted or refused identically (reason and message)', () => {
    const seen: Seen = { accepted: 0, refused: 0 };
    fc.assert(
      fc.property(
        fc.array(fc.tuple(json, fc.array(edit, { minLength: 1, maxLength: 3 })), { minLength: 30, maxLength: 60 }),
        (cases) => {
          expectSameOutcomes(
            cases.map(([v, edits]) => applyEdits(JSON.stringify(v), edits)),
            seen,
          );
        },
      ),
      { numRuns: 15 },
    );
    expectBothOutcomes(seen);
  });

  it('strings with escaped code units, including lone and swapped surrogates', () => {
    const unit = fc.oneof(
      fc.integer({ min: 0, max: 0xffff }),
      fc.integer({ min: 0xd800, max: 0xdfff }),
      fc.integer({ min: 0x20, max: 0xff }),
    );
    const piece = fc.tuple(
      fc.array(unit, { minLength: 0, maxLength: 6 }),
      fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
    );
    const render = ([units, escape]: [number[], boolean[]]): string => {
      const s = String.fromCharCode(...units);
      let out = '';
      for (let i = 0; i < s.length; i++) {
        const c = s.charCodeAt(i);
        const isSurrogate = c >= 0xd800 && c <= 0xdfff;
        const raw = !escape[i % 6] && c >= 0x20 && c !== 0x22 && c !== 0x5c && !isSurrogate;
        out += raw
          ? s[i]
          : escape[(i + 1) % 6]
            ? `\\u${c.toString(16).padStart(4, '0').toUpperCase()}`
            : `\\u${c.toString(16).padStart(4, '0')}`;
      }
      return out;
    };
    const seen: Seen = { accepted: 0, refused: 0 };
    fc.assert(
      fc.property(fc.array(fc.tuple(piece, piece), { minLength: 30, maxLength: 60 }), (pairs) => {
        // A string value and a key: lone surrogates must be refused in both positions.
        expectSameOutcomes(
          pairs.flatMap(([a, b]) => [utf8(`"${render(a)}"`), utf8(`{"${render(a)}":"${render(b)}","k":1}`)]),
          seen,
        );
      }),
      { numRuns: 15 },
    );
    expectBothOutcomes(seen);
  });

  it('numbers in every literal form print as ECMAScript does, and unsafe integer literals are refused alike', () => {
    const forms = fc
      .double({ noNaN: true, noDefaultInfinity: true })
      .chain((n) =>
        fc.constantFrom(
          String(n),
          n.toExponential(),
          n.toExponential().toUpperCase(),
          n.toPrecision(21),
          `${String(n)}`.replace('e+', 'e'),
        ),
      );
    const bigIntegers = fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String);
    const seen: Seen = { accepted: 0, refused: 0 };
    fc.assert(
      fc.property(fc.array(fc.oneof(forms, bigIntegers), { minLength: 40, maxLength: 80 }), (literals) => {
        expectSameOutcomes(
          literals.flatMap((l) => [utf8(l), utf8(`[${l},{"n":${l}}]`)]),
          seen,
        );
      }),
      { numRuns: 15 },
    );
    expectBothOutcomes(seen);
  });

  it('the single-shot command writes canonical bytes, or one line and exit 2', () => {
    const ok = rustCommand('canonicalize', '{"b":[1.0,"\\u00e9"],"a":1E30}');
    expect(ok.status).toBe(0);
    expect(ok.stdout.toString('utf8')).toBe(canonicalize(parseStrict('{"b":[1.0,"\\u00e9"],"a":1E30}')));
    const bad = rustCommand('canonicalize', '{"a":1,"a":2}');
    expect(bad.status).toBe(2);
    expect(bad.stdout.length).toBe(0);
    expect(bad.stderr).toBe('detsim-formats: [struct_duplicate_key] duplicate key "a" at offset 7\n');
  });
});
