// Reason codes (D7): every decision about input is {action, layer, reason} with a stable,
// non-empty, published code; the same input gives the same code.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../coordinator/config.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { decodeEnvelope } from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import { LAYER_NAMES, REASONS, RETIRED_REASONS, type Decision, type ReasonCode } from '../../core/formats/reasons.js';
import { readId, readU64 } from '../../core/formats/scalars.js';
import { FIELD_TABLE } from '../../coordinator/receipt/fields.js';
import { FAMILIES, reasonsMarkdown, reasonsText } from '../../coordinator/receipt/reasons-doc.js';

const good = {
  sessionId: 's1',
  masterSeed: '42',
  steps: 3,
  environment: { id: 'env', model: 'forage' },
  agents: [{ id: 'a0', model: 'walker' }],
};

// Bad inputs across config admission, canonical JSON and scalars, each refused by a decision.
const BAD: [string, () => unknown][] = [
  [
    'duplicate agent id',
    () =>
      resolveConfig({
        ...good,
        agents: [
          { id: 'a0', model: 'walker' },
          { id: 'a0', model: 'walker' },
        ],
      }),
  ],
  ['bad master seed', () => resolveConfig({ ...good, masterSeed: '007' })],
  ['unknown config field', () => resolveConfig({ ...good, colour: 'red' })],
  ['unknown model', () => resolveConfig({ ...good, agents: [{ id: 'a0', model: 'nope' }] })],
  ['61 agents', () => resolveConfig({ ...good, agents: [{ count: 61, prefix: 'a', model: 'walker' }] })],
  ['bad id', () => resolveConfig({ ...good, sessionId: 'Bad Id' })],
  ['missing field', () => resolveConfig({ ...good, steps: undefined })],
  ['duplicate JSON key', () => parseStrict('{"a":1,"a":2}')],
  ['trailing data', () => parseStrict('{} x')],
  ['unsafe integer', () => parseStrict('9007199254740993')],
  ['not a U64', () => readU64('-1', 'f')],
  ['not an Id', () => readId('UPPER', 'f')],
  ['envelope too short', () => decodeEnvelope(new Uint8Array(10))],
  ['envelope wrong magic', () => decodeEnvelope(new Uint8Array(200))],
];

function decide(fn: () => unknown): Decision {
  try {
    fn();
  } catch (e) {
    if (e instanceof DetsimError) return e.decision;
    throw e;
  }
  return { action: 'allow', layer: 'L1', reason: '' as ReasonCode };
}

describe('reason codes (D7)', () => {
  it('[D7] every decision about bad input has a non-empty, registered reason naming its layer', () => {
    for (const [name, fn] of BAD) {
      const d = decide(fn);
      expect(d.action, name).toBe('block');
      expect(d.reason.length, name).toBeGreaterThan(0);
      expect(REASONS, name).toHaveProperty(d.reason);
      expect(d.layer, name).toBe(REASONS[d.reason].layer);
    }
  });

  it('[D7] the same input gives the same decision, with no time, pid or random value in it', () => {
    for (const [name, fn] of BAD) {
      const first = decide(fn);
      const again = decide(fn);
      expect(again, name).toEqual(first);
      expect(first.reason, name).not.toMatch(/\d{4,}/);
    }
  });

  it('every registered code is in a published family, on a known layer, with a summary', () => {
    const codes = Object.keys(REASONS) as ReasonCode[];
    expect(codes.length).toBeGreaterThan(30);
    for (const c of codes) {
      expect(
        FAMILIES.some((f) => c.startsWith(f)),
        c,
      ).toBe(true);
      expect(c, c).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(Object.keys(LAYER_NAMES), c).toContain(REASONS[c].layer);
      expect(REASONS[c].summary.length, c).toBeGreaterThan(0);
    }
    const text = reasonsText();
    for (const c of codes) expect(text).toContain(`${c}\t`);
  });

  it('retired perm_tls_unsupported (every runtime serves TLS): not emittable, still published, never reused', () => {
    expect(REASONS).not.toHaveProperty('perm_tls_unsupported');
    expect(RETIRED_REASONS).toHaveProperty('perm_tls_unsupported');
    for (const code of Object.keys(RETIRED_REASONS)) {
      expect(REASONS, code).not.toHaveProperty(code);
      expect(
        FAMILIES.some((f) => code.startsWith(f)),
        code,
      ).toBe(true);
    }
    const retired = reasonsMarkdown().split('## Retired codes')[1] ?? '';
    expect(retired).toContain('| L4 permission | `perm_tls_unsupported` |');
    expect(reasonsText()).not.toContain('perm_tls_unsupported');
  });

  it('docs/reasons.md is the generated list (regenerate: npx detsim reasons --markdown > docs/reasons.md)', () => {
    const docs = readFileSync(new URL('../../docs/reasons.md', import.meta.url), 'utf8');
    expect(docs, 'docs/reasons.md is stale: run `npx detsim reasons --markdown > docs/reasons.md`').toBe(
      reasonsMarkdown(),
    );
  });
});

describe('publishing (detsim reasons, detsim fields)', () => {
  const cli = (args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'coordinator/cli/main.ts', ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });

  it('detsim reasons prints every code once with its layer; --markdown is docs/reasons.md', () => {
    const r = cli(['reasons']);
    expect(r.status).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.map((l) => l.split('\t')[0]).sort()).toEqual(Object.keys(REASONS).sort());
    for (const l of lines) expect(l).toMatch(/^[a-z_0-9]+\tL[1-8] [a-z]+\t.+$/);
    expect(cli(['reasons', '--markdown']).stdout).toBe(
      readFileSync(new URL('../../docs/reasons.md', import.meta.url), 'utf8').replace(/\n$/, '') + '\n',
    );
  });

  it('[D1] detsim fields publishes the whole classification table', () => {
    const r = cli(['fields', '--json']);
    expect(r.status).toBe(0);
    const t = JSON.parse(r.stdout) as { fields: unknown[]; physicalNames: string[]; defaultPrecision: number };
    expect(t.fields).toEqual(JSON.parse(JSON.stringify(FIELD_TABLE)));
    expect(t.defaultPrecision).toBe(9);
    expect(t.physicalNames).toContain('generated_at');
    const text = cli(['fields']).stdout;
    expect(text.split('\n').filter((l) => /^(repro|physical|opaque)\s/.test(l))).toHaveLength(FIELD_TABLE.length);
  });
});
