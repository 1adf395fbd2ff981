// Reason codes (D7): every decision about input is {action, layer, reason} with a stable,
// non-empty, published code; the same input gives the same code.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../coordinator/config.js';
import { parseStrict } from '../../coordinator/formats/canonical-json.js';
import { DetsimError } from '../../coordinator/formats/errors.js';
import { LAYER_NAMES, REASONS, type Decision, type ReasonCode } from '../../coordinator/formats/reasons.js';
import { readId, readU64 } from '../../coordinator/formats/scalars.js';
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
  ['duplicate agent id', () => resolveConfig({ ...good, agents: [{ id: 'a0', model: 'walker' }, { id: 'a0', model: 'walker' }] })],
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
  it('D7: every decision about bad input has a non-empty, registered reason naming its layer', () => {
    for (const [name, fn] of BAD) {
      const d = decide(fn);
      expect(d.action, name).toBe('block');
      expect(d.reason.length, name).toBeGreaterThan(0);
      expect(REASONS, name).toHaveProperty(d.reason);
      expect(d.layer, name).toBe(REASONS[d.reason].layer);
    }
  });

  it('D7: the same input gives the same decision, with no time, pid or random value in it', () => {
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
      expect(FAMILIES.some((f) => c.startsWith(f)), c).toBe(true);
      expect(c, c).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(Object.keys(LAYER_NAMES), c).toContain(REASONS[c].layer);
      expect(REASONS[c].summary.length, c).toBeGreaterThan(0);
    }
    const text = reasonsText();
    for (const c of codes) expect(text).toContain(`${c}\t`);
  });

  it('docs/reasons.md is the generated list (regenerate: npx detsim reasons --markdown > docs/reasons.md)', () => {
    const docs = readFileSync(new URL('../../docs/reasons.md', import.meta.url), 'utf8');
    expect(docs, 'docs/reasons.md is stale: run `npx detsim reasons --markdown > docs/reasons.md`').toBe(reasonsMarkdown());
  });
});
