// `--set path=value` overrides (coordinator/overrides.ts), without any worker: values read as YAML,
// applied to the parsed document before the schema checks it, a path the config does not have
// refused by name (struct_override_path), a bad value refused by the schema's own message, and the
// document given never changed. The CLI side (the same ReproHash as an edited YAML) is run-set.test.ts.
import { describe, expect, it } from 'vitest';
import { readConfigDocument } from '../../coordinator/config.js';
import {
  applyOverrides,
  formatOverride,
  loadConfigWithOverrides,
  parseOverride,
  parseOverrides,
  resolveWithOverrides,
  type Override,
} from '../../coordinator/overrides.js';
import { DetsimError } from '../../core/formats/errors.js';

const EXAMPLE = 'examples/forage-walkers.yaml';

function refusal(fn: () => unknown): DetsimError {
  try {
    fn();
  } catch (e) {
    if (e instanceof DetsimError) return e;
    throw e;
  }
  throw new Error('accepted');
}

const planWith = (...texts: string[]) => loadConfigWithOverrides(EXAMPLE, parseOverrides(texts));

describe('parseOverride', () => {
  it('reads the value as one YAML scalar or flow value', () => {
    expect(parseOverride('steps=500')).toEqual({ path: 'steps', value: 500 });
    expect(parseOverride('a.b=true')).toEqual({ path: 'a.b', value: true });
    expect(parseOverride('a=[1, 2]')).toEqual({ path: 'a', value: [1, 2] });
    expect(parseOverride('a={food: 3, width: 10}')).toEqual({ path: 'a', value: { food: 3, width: 10 } });
    expect(parseOverride('masterSeed="42"')).toEqual({ path: 'masterSeed', value: '42' });
    expect(parseOverride('x=a=b')).toEqual({ path: 'x', value: 'a=b' });
    expect(parseOverride('agents[0].params.explore=4')).toEqual({ path: 'agents[0].params.explore', value: 4 });
    expect(parseOverride('x=')).toEqual({ path: 'x', value: null });
  });

  it('refuses text that is not path=value, a malformed path, a value YAML cannot read, and an unsafe integer', () => {
    expect(refusal(() => parseOverride('steps'))).toMatchObject({ reason: 'struct_invalid_field', field: '--set' });
    expect(refusal(() => parseOverride('=3'))).toMatchObject({ reason: 'struct_invalid_field' });
    expect(refusal(() => parseOverride('a..b=1'))).toMatchObject({ reason: 'struct_override_path' });
    expect(refusal(() => parseOverride('a[x]=1'))).toMatchObject({ reason: 'struct_override_path' });
    expect(refusal(() => parseOverride('a=[1,')).message).toMatch(/^--set a: "\[1," is not a YAML value/);
    const big = refusal(() => parseOverride('masterSeed=18446744073709551615'));
    expect(big.reason).toBe('struct_unsafe_integer');
    expect(big.message).toMatch(/would be rounded; quote it/);
  });

  it('refuses a path given twice, --master-seed counting as masterSeed', () => {
    expect(refusal(() => parseOverrides(['steps=1', 'steps=2'])).message).toBe('--set steps: given twice');
    expect(refusal(() => parseOverrides(['masterSeed="1"'], '2')).message).toMatch(/--master-seed sets it too/);
    expect(parseOverrides([], '7')).toEqual([{ path: 'masterSeed', value: '7' }]);
  });

  it('formats an override as path=JSON', () => {
    expect(formatOverride({ path: 'environment.params', value: { food: 3 } })).toBe('environment.params={"food":3}');
  });
});

describe('applyOverrides', () => {
  it('sets the fields in order, makes missing mappings, and leaves the given document as it was', () => {
    const doc = readConfigDocument(EXAMPLE) as Record<string, any>;
    const before = JSON.stringify(doc);
    const overrides: Override[] = [
      { path: 'environment.params', value: { width: 30 } },
      { path: 'environment.params.food', value: 5 },
      { path: 'recovery.maxRestarts', value: 2 },
    ];
    const out = applyOverrides(doc, overrides) as Record<string, any>;
    expect(out.environment.params).toEqual({ width: 30, food: 5 });
    expect(out.recovery).toEqual({ maxRestarts: 2 });
    expect(JSON.stringify(doc)).toBe(before);
  });

  it('refuses a path through a value that is not a mapping, or past the end of a list, naming it', () => {
    const doc = readConfigDocument(EXAMPLE);
    expect(refusal(() => applyOverrides(doc, [{ path: 'steps.x', value: 1 }])).message).toBe(
      '--set steps.x: steps is a number, not a mapping',
    );
    expect(refusal(() => applyOverrides(doc, [{ path: 'agents[0].model', value: 'x' }])).message).toBe(
      '--set agents[0].model: agents is a mapping, not a list',
    );
    const list = { agents: [{ id: 'a', model: 'walker' }] };
    expect(refusal(() => applyOverrides(list, [{ path: 'agents[1].id', value: 'b' }]))).toMatchObject({
      reason: 'struct_override_path',
      message: '--set agents[1].id: agents has 1 entries, no [1]',
    });
  });
});

describe('resolveWithOverrides: every override meets the config schema', () => {
  it('changes the plan as the same config text would, and records the overrides', () => {
    const plan = planWith('environment.params.food=30', 'agents.count=8', 'steps=50', 'workers.agentsPerWorker=2');
    expect(plan.environment.params).toEqual({ width: 24, height: 24, food: 30 });
    expect(plan.agents).toHaveLength(8);
    expect(plan.workers).toHaveLength(5);
    expect(plan.steps).toBe(50);
    expect(plan.overrides).toEqual([
      { path: 'environment.params.food', value: 30 },
      { path: 'agents.count', value: 8 },
      { path: 'steps', value: 50 },
      { path: 'workers.agentsPerWorker', value: 2 },
    ]);
    // --master-seed: the seeds derive from it.
    const seeded = loadConfigWithOverrides(EXAMPLE, parseOverrides([], '12345'));
    expect(seeded.masterSeed).toBe('12345');
    expect(seeded.agents[0]!.seed).not.toBe(planWith().agents[0]!.seed);
    expect(planWith().overrides).toBeUndefined();
  });

  it('refuses a path the config does not have as struct_override_path, naming it', () => {
    for (const [text, field] of [
      ['environment.parms.food=3', 'environment.parms.food'],
      ['agents.cont=3', 'agents.cont'],
      ['environment.params.foo=1', 'environment.params.foo'],
      ['nosuchfield=1', 'nosuchfield'],
    ] as const) {
      const e = refusal(() => planWith(text));
      expect(e.reason, text).toBe('struct_override_path');
      expect(e.field).toBe(field);
      expect(e.message.startsWith(`--set ${field}: no such config field (`), e.message).toBe(true);
    }
  });

  it("refuses a bad value with the schema's own reason and message, saying which override set it", () => {
    const count = refusal(() => planWith('agents.count=xx'));
    expect(count).toMatchObject({ reason: 'struct_invalid_field', field: 'agents.count' });
    expect(count.message).toMatch(/^agents\.count: .*\(overridden: agents\.count="xx"\)$/);
    expect(refusal(() => planWith('steps=0'))).toMatchObject({ reason: 'struct_invalid_field', field: 'steps' });
    expect(refusal(() => planWith('agents.count=61'))).toMatchObject({ reason: 'size_agents_over_60' });
    const seed = refusal(() => planWith('masterSeed=42'));
    expect(seed.reason).toBe('struct_invalid_u64');
    expect(seed.message).toMatch(/quote it in YAML\) \(overridden: masterSeed=42\)$/);
    expect(refusal(() => planWith('environment.params.food=600')).field).toBe('environment.params.food');
  });

  it('a refusal that has nothing to do with the overrides stays as the schema said it', () => {
    const doc = { ...(readConfigDocument(EXAMPLE) as object), steps: -1 };
    const e = refusal(() => resolveWithOverrides(doc, [{ path: 'stepHz', value: 30 }]));
    expect(e.message).not.toMatch(/overridden/);
    expect(e.field).toBe('steps');
  });
});
