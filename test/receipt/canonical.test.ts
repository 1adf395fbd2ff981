// R1–R3 and the ReproHash on hand-computed expectations (D1, D2, D3, D5), plus the published
// field table. The expected canonical texts below are written by hand, not produced by the code.
import { createHash } from 'node:crypto';
import canonicalizeOracle from 'canonicalize';
import { describe, expect, it } from 'vitest';
import { canonicalSplit, compareKeyValues, fixedPoint } from '../../coordinator/receipt/canonical.js';
import { FIELD_TABLE, PHYSICAL_NAMES, type FieldRule, formatFieldTable } from '../../coordinator/receipt/fields.js';
import { reproHash } from '../../coordinator/receipt/reprohash.js';
import { sampleReceipt } from './sample.js';

const sha16 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 16);

const T: FieldRule[] = [
  { path: 'id', cls: 'repro', summary: '' },
  { path: 'ts', cls: 'physical', summary: '' },
  { path: 'items', cls: 'repro', summary: '', order: 'agentId' },
  { path: 'items[]', cls: 'repro', summary: '' },
  { path: 'items[].agentId', cls: 'repro', summary: '' },
  { path: 'items[].x', cls: 'repro', summary: '' },
  { path: 'items[].w', cls: 'repro', summary: '', precision: 3 },
  { path: 'seq', cls: 'repro', summary: '', order: 'as-written' },
  { path: 'seq[]', cls: 'repro', summary: '' },
  { path: 'seq[].kind', cls: 'repro', summary: '' },
  { path: 'opt', cls: 'repro', summary: '' },
  { path: 'model', cls: 'repro', summary: '', subtree: true },
  { path: 'steps', cls: 'repro', summary: '', order: 'k' },
  { path: 'steps[]', cls: 'repro', summary: '', subtree: true },
];

const input = {
  id: 'x',
  ts: 'now',
  items: [
    { agentId: 'b', x: 1.5 },
    { agentId: 'a', x: -0, w: 1 / 3 },
  ],
  seq: [{ kind: 'save' }, { kind: 'rollback' }],
  model: { b: 0.1, a: [3, 1] },
  extra: 7,
};
const EXPECTED =
  '{"id":"x","items":[{"agentId":"a","w":"0.333","x":0},{"agentId":"b","w":null,"x":"1.500000000"}],' +
  '"model":{"a":[3,1],"b":"0.100000000"},"opt":null,"seq":[{"kind":"save"},{"kind":"rollback"}],"steps":null}';

describe('receipt canonicalisation (R1–R3)', () => {
  it('[D1] the classification table is published and consistent', () => {
    const text = formatFieldTable();
    const paths = FIELD_TABLE.map((r) => r.path);
    expect(new Set(paths).size).toBe(paths.length); // no path twice
    for (const r of FIELD_TABLE) expect(text).toContain(r.path);
    // No repro/opaque row may carry a name docs/spec/diff0.md requires to be physical.
    for (const r of FIELD_TABLE) {
      const last = r.path.split('.').pop()!.replace('[]', '');
      if (PHYSICAL_NAMES.includes(last)) expect(r.cls, r.path).toBe('physical');
    }
    // Every table row names a parent that is itself in the table (no orphan rows).
    for (const p of paths) {
      const parent = p.endsWith('[]') ? p.slice(0, -2) : p.includes('.') ? p.slice(0, p.lastIndexOf('.')) : null;
      if (parent !== null) expect(paths, `parent of ${p}`).toContain(parent);
    }
  });

  it('[D1] an unclassified field is counted, reported and treated as physical — never silently dropped', () => {
    const s = canonicalSplit(input, { table: T });
    expect(s.unknownFields).toEqual([{ path: 'extra', count: 1 }]);
    expect(s.physical).toEqual({ extra: 7, ts: 'now' }); // kept, on the physical side
    expect(JSON.stringify(s.repro)).not.toContain('extra');
    // Counted per occurrence: the real table, an unknown field in every step.
    const r = sampleReceipt() as unknown as { steps: { behaviour: Record<string, unknown> }[] };
    for (const st of r.steps) st.behaviour.colour = 'red';
    const h = reproHash(r);
    expect(h.unknownFields).toEqual([{ path: 'steps[].behaviour.colour', count: 2 }]);
    expect(reproHash(sampleReceipt()).unknownFields).toEqual([]);
  });

  it('[DIFF-2] R1–R3: a small receipt gives exactly the hand-written canonical text and its hash', () => {
    const s = canonicalSplit(input, { table: T });
    const h = reproHash(input, { table: T });
    expect(h.canonical).toBe(EXPECTED);
    expect(canonicalizeOracle(s.repro)).toBe(EXPECTED); // RFC 8785 oracle agrees
    expect(h.reproHash).toBe(sha16(EXPECTED));
    expect(h.reproHash).toMatch(/^[0-9a-f]{16}$/);
  });

  it('[D2] lists of objects are sorted by their stable key before canonicalisation', () => {
    const swapped = { ...input, items: [...input.items].reverse() };
    expect(reproHash(swapped, { table: T }).canonical).toBe(EXPECTED);
    // U64 keys sort numerically: "9" before "10".
    const steps = canonicalSplit({ steps: [{ k: '10' }, { k: '9' }] }, { table: T });
    expect(canonicalizeOracle((steps.repro as { steps: unknown }).steps)).toBe('[{"k":"9"},{"k":"10"}]');
    // Equal keys: ties broken by content, so arrival order never decides.
    const a = canonicalSplit(
      {
        items: [
          { agentId: 'a', x: 2 },
          { agentId: 'a', x: 1 },
        ],
      },
      { table: T },
    );
    const b = canonicalSplit(
      {
        items: [
          { agentId: 'a', x: 1 },
          { agentId: 'a', x: 2 },
        ],
      },
      { table: T },
    );
    expect(canonicalizeOracle(a.repro)).toBe(canonicalizeOracle(b.repro));
    // Order that is meaning stays as written; scalar lists keep their order.
    const rev = canonicalSplit({ seq: [{ kind: 'rollback' }, { kind: 'save' }], model: { a: [1, 3] } }, { table: T });
    expect(canonicalizeOracle(rev.repro)).toContain('"seq":[{"kind":"rollback"},{"kind":"save"}]');
    expect(canonicalizeOracle(rev.repro)).toContain('"a":[1,3]');
    // Real table: completion order of workers and agent order in a step do not reach the hash.
    const r1 = sampleReceipt();
    const r2 = sampleReceipt({ order: ['worker-1', 'worker-0'] }) as unknown as {
      steps: { behaviour: { agents: unknown[] } }[];
    };
    for (const st of r2.steps) st.behaviour.agents.reverse();
    expect(reproHash(r2).reproHash).toBe(reproHash(r1).reproHash);
    expect(compareKeyValues('9', '10')).toBeLessThan(0);
    expect(compareKeyValues('b', 'a')).toBeGreaterThan(0);
  });

  it('[D3] non-integers become fixed-point strings at the table precision, -0 is 0, enums by value', () => {
    expect(fixedPoint(0.1 + 0.2)).toBe('0.300000000');
    expect(fixedPoint(2.5)).toBe('2.500000000');
    expect(fixedPoint(1 / 3, 3)).toBe('0.333');
    expect(fixedPoint(-0)).toBe(0);
    expect(Object.is(fixedPoint(-0), 0)).toBe(true);
    expect(fixedPoint(-1e-12)).toBe('0.000000000'); // rounds to zero: no sign
    expect(fixedPoint(-1.25)).toBe('-1.250000000');
    expect(fixedPoint(5)).toBe(5); // integers stay exact numbers
    expect(fixedPoint(2 ** 53 - 1)).toBe(2 ** 53 - 1);
    // Float jitter below the precision does not change the hash; above it, it does.
    const x = { model: { v: 0.1 + 0.2 } };
    expect(reproHash(x, { table: T }).reproHash).toBe(reproHash({ model: { v: 0.3 } }, { table: T }).reproHash);
    expect(reproHash(x, { table: T }).reproHash).not.toBe(
      reproHash({ model: { v: 0.3000001 } }, { table: T }).reproHash,
    );
    // Enums by value: a TypeScript string enum member is its value in the canonical text.
    enum Kind {
      Save = 'save',
      Rollback = 'rollback',
    }
    expect(reproHash({ seq: [{ kind: Kind.Save }] }, { table: T }).canonical).toContain('"seq":[{"kind":"save"}]');
    expect(reproHash(sampleReceipt()).canonical).toContain('"evidence_class":"simulated"');
    // Absent optional values are null: {a} and {a, opt: null} are the same receipt.
    expect(reproHash({ id: 'x' }, { table: T }).reproHash).toBe(
      reproHash({ id: 'x', opt: null }, { table: T }).reproHash,
    );
  });

  it('[DIFF-1] physical fields never reach the hash (pids, wall times, completion order, timestamps)', () => {
    const a = reproHash(sampleReceipt());
    const b = reproHash(sampleReceipt({ wall: '987654321', pid: 1, order: ['worker-1', 'worker-0'] }));
    expect(b.reproHash).toBe(a.reproHash);
    expect(canonicalSplit(sampleReceipt()).physical).not.toEqual(canonicalSplit(sampleReceipt({ wall: '5' })).physical);
  });
});

// Every leaf of the sample receipt, with its JSON path.
function leaves(v: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (v !== null && typeof v === 'object') {
    return Object.entries(v as object).flatMap(([k, c]) => leaves(c, [...path, Array.isArray(v) ? Number(k) : k]));
  }
  return [path];
}

function tamper(root: unknown, path: (string | number)[]): unknown {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let cur = copy;
  for (const p of path.slice(0, -1)) cur = cur[p] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  const v = cur[last];
  cur[last] =
    typeof v === 'string'
      ? `${v.slice(0, -1)}${v.endsWith('x') ? 'y' : 'x'}`
      : typeof v === 'number'
        ? v + 1
        : typeof v === 'boolean'
          ? !v
          : 'x';
  return copy;
}

// Written by hand from the sample: the leaves that are physical (everything else is ReproCore).
const PHYSICAL_LEAF = [
  /^generated_at$/,
  /^measure_source$/,
  /^measure_ts$/,
  /^run\.dispatch$/,
  /^run\.(environment|agents\.\d+)\.workerId$/,
  /^run\.workers\./,
  /^run\.(agentsPerWorker|transport)$/,
  /^run\.deadlines\./,
  /^steps\.\d+\.operational\./,
  /^summary\.(wallTimeMs|failure|behaviourDigestAlgorithm)$/,
  /^platformFingerprint\./,
];

describe('sensitivity (D5)', () => {
  it('[D5] tampering with any ReproCore field changes the ReproHash; tampering with a physical one does not', () => {
    const base = sampleReceipt();
    const h0 = reproHash(base).reproHash;
    const all = leaves(base);
    expect(all.length).toBeGreaterThan(60);
    let repro = 0;
    for (const path of all) {
      const name = path.join('.');
      const physical = PHYSICAL_LEAF.some((re) => re.test(name));
      const h = reproHash(tamper(base, path)).reproHash;
      if (physical) expect(h, `${name} is physical`).toBe(h0);
      else {
        repro++;
        expect(h, `${name} is ReproCore`).not.toBe(h0);
      }
    }
    expect(repro).toBeGreaterThan(50);
  });

  it('[D5] one character of one agent decision changes the hash', () => {
    const base = sampleReceipt() as unknown as { steps: { behaviour: { agents: { decision: { move: string } }[] } }[] };
    const h0 = reproHash(base).reproHash;
    base.steps[1]!.behaviour.agents[0]!.decision.move = 'easT';
    expect(reproHash(base).reproHash).not.toBe(h0);
  });
});
