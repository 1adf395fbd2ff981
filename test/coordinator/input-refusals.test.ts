// Bad input to `detsim run` (and the other --steps flags) through the real CLI: wrong model params,
// bad model modules, out-of-range steps and deadlines, a directory as the config and an unwritable
// --out are each refused before anything starts — exit 2, one line naming the reason and the
// field, and no run directory written (issue 11 items 8, 9, 10, 18, 19, 20).
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_DEADLINE_MS, MAX_STEPS, loadConfig, resolveConfig } from '../../coordinator/config.js';
import { readStepsFlag } from '../../coordinator/cli/common.js';
import { refusal } from '../refusal.js';
import { detsimCli, expectCliRefusal } from '../cli-refusal.js';

const LIF_PAIR = readFileSync('examples/lif-pair.yaml', 'utf8');

/** The lif-pair example with one textual change (the change must apply). */
function variant(from: string | RegExp, to: string): string {
  const text = LIF_PAIR.replace(from, to);
  expect(text).not.toBe(LIF_PAIR);
  return text;
}

/** Write `text` as a config in a fresh directory and run it; returns the result and the --out it used. */
function runConfig(text: string, extra: string[] = []) {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-input-'));
  writeFileSync(join(dir, 'not-a-module.txt'), 'hello\n');
  mkdirSync(join(dir, 'a-directory.ts'));
  writeFileSync(join(dir, 'imports-missing.mjs'), "import { x } from './lib/gone.mjs';\nexport default x;\n");
  const file = join(dir, 'config.yaml');
  writeFileSync(file, text);
  const out = join(dir, 'runs');
  return { r: detsimCli(['run', file, '--out', out, ...extra]), out };
}

const badConfigs: [string, string, string, string][] = [
  // item 8: params the worker would refuse, refused at plan time by the model's own check
  [
    'a built-in agent param out of range',
    variant('params: {}', 'params: { neurons: 2 }'),
    'struct_invalid_field',
    'agents[0].params.neurons',
  ],
  [
    'an unknown environment param',
    variant('food: 6 }', 'food: 6, colour: 1 }'),
    'struct_unknown_field',
    'environment.params',
  ],
  [
    'an environment param that breaks another (food > cells)',
    variant('food: 6 }', 'food: 200 }'),
    'struct_invalid_field',
    'environment.params.food',
  ],
  [
    'a strict flag that is not a boolean',
    variant('params: {}', 'params: { strict: "yes" }'),
    'struct_invalid_field',
    'agents[0].params.strict',
  ],
  // item 8: model modules checked before anything starts (no model code runs in the coordinator)
  [
    'a model module that is a directory',
    variant('model: lif', 'model: ./a-directory.ts'),
    'struct_unknown_model',
    'agents[0].model',
  ],
  [
    'a model module that is not a module',
    variant('model: lif', 'model: ./not-a-module.txt'),
    'struct_unknown_model',
    'agents[0].model',
  ],
  [
    'a model module that does not exist',
    variant('model: lif', 'model: ./missing.ts'),
    'struct_unknown_model',
    'agents[0].model',
  ],
  [
    'a model module whose static import is not there',
    variant('model: lif', 'model: ./imports-missing.mjs'),
    'struct_unknown_model',
    'agents[0].model',
  ],
  [
    'a model module file: URL naming a host',
    variant('model: lif', 'model: "file://elsewhere/m.ts"'),
    'struct_unknown_model',
    'agents[0].model',
  ],
  // items 9 and 18: one bound on steps
  ['steps: 1e12', variant('steps: 120', 'steps: 1e12'), 'struct_invalid_field', 'steps'],
  ['steps: 0', variant('steps: 120', 'steps: 0'), 'struct_invalid_field', 'steps'],
  // item 10: every deadline within Node's timer range
  [
    'deadlines.stepMs above 2^31-1',
    variant('stepMs: 10000', 'stepMs: 2147483648'),
    'struct_invalid_field',
    'deadlines.stepMs',
  ],
  [
    'deadlines.startupMs above 2^31-1',
    variant('startupMs: 30000', 'startupMs: 1e12'),
    'struct_invalid_field',
    'deadlines.startupMs',
  ],
  [
    'deadlines.captureMs above 2^31-1',
    variant('stepMs: 10000', 'stepMs: 10000\n  captureMs: 2147483648'),
    'struct_invalid_field',
    'deadlines.captureMs',
  ],
];

describe('detsim run refuses bad input before anything starts (CLI)', () => {
  for (const [name, text, reason, field] of badConfigs) {
    it(`${name}: exit 2, [${reason}] ${field}, no run directory`, () => {
      const { r, out } = runConfig(text);
      expectCliRefusal(r, reason, field);
      expect(existsSync(out)).toBe(false);
    });
  }

  it('a model module whose import is not there is refused naming the import', () => {
    const { r } = runConfig(variant('model: lif', 'model: ./imports-missing.mjs'));
    expect(r.stderr).toMatch(
      /model module "\.\/imports-missing\.mjs" imports \.\/lib\/gone\.mjs, which is not there \(/,
    );
  });

  for (const steps of ['0', String(MAX_STEPS + 1), '1e3']) {
    it(`--steps ${steps}: exit 2 naming --steps, no run directory`, () => {
      const { r, out } = runConfig(LIF_PAIR, ['--steps', steps]);
      expectCliRefusal(r, 'struct_invalid_field', '--steps');
      expect(existsSync(out)).toBe(false);
    });
  }

  it('replay, verify and resume take the same --steps bound', () => {
    // The bound is checked before resume looks at the run directory at all.
    expectCliRefusal(detsimCli(['resume', 'runs/no-such-run', '--steps', '0']), 'struct_invalid_field', '--steps');
    expectCliRefusal(
      detsimCli(['replay', 'examples/lif-pair.yaml', '--steps', '0']),
      'struct_invalid_field',
      '--steps',
    );
    expectCliRefusal(
      detsimCli([
        'verify',
        '--config',
        'examples/lif-pair.yaml',
        '--steps',
        String(MAX_STEPS + 1),
        '--no-golden-marker',
      ]),
      'struct_invalid_field',
      '--steps',
    );
  });

  it('a directory as the config: a named one-line refusal, not an EISDIR stack trace (item 19)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-input-'));
    const out = join(dir, 'runs');
    const line = expectCliRefusal(detsimCli(['run', 'examples', '--out', out]), 'struct_invalid_field', 'examples');
    expect(line).toContain('examples is a directory, not a config file');
    expect(existsSync(out)).toBe(false);
  });

  it('a missing config file: a named refusal', () => {
    const line = expectCliRefusal(
      detsimCli(['run', 'examples/no-such.yaml']),
      'struct_invalid_field',
      'examples/no-such.yaml',
    );
    expect(line).toBe('detsim: [struct_invalid_field] examples/no-such.yaml: cannot read it (no such file)');
  });

  it('a file that is not a config (text, a list, empty) is refused naming the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-input-'));
    for (const [text, what] of [
      ['hello\n', 'a string'],
      ['- 1\n- 2\n', 'a list'],
      ['', 'empty'],
    ] as const) {
      writeFileSync(join(dir, 'c.yaml'), text);
      const line = expectCliRefusal(
        detsimCli(['run', join(dir, 'c.yaml')]),
        'struct_invalid_field',
        join(dir, 'c.yaml'),
      );
      expect(line).toBe(
        `detsim: [struct_invalid_field] ${join(dir, 'c.yaml')}: not a config (a mapping with sessionId, steps, environment and agents), but ${what}`,
      );
    }
  });
});

describe('--out must be a place where run directories can be written (item 20)', () => {
  const file = join(mkdtempSync(join(tmpdir(), 'detsim-out-')), 'a-file');
  writeFileSync(file, 'x');
  const targets: [string, string][] = [
    ['under /proc (a recursive mkdir there never returns)', '/proc/detsim-out/runs'],
    ['/proc itself', '/proc'],
    ['under /sys', '/sys/detsim-out'],
    ['an existing file', file],
    ['a path below a file', join(file, 'runs')],
  ];
  for (const [name, target] of targets) {
    it(`${name}: refused quickly, exit 2, nothing created`, () => {
      const { r } = runConfig(LIF_PAIR.replace('steps: 120', 'steps: 1'), ['--out', target]);
      expect(r.error).toBeUndefined(); // finished well within the timeout
      expectCliRefusal(r, 'perm_out_dir_unwritable', '--out');
      if (target.startsWith(resolve(file))) expect(existsSync(join(file, 'runs'))).toBe(false);
      else expect(existsSync(target) && target !== '/proc').toBe(false);
    });
  }
});

describe('the bounds themselves (one constant each)', () => {
  const base = () =>
    structuredClone({
      sessionId: 's',
      masterSeed: '1',
      steps: 1,
      environment: { id: 'env', model: 'forage' },
      agents: { count: 1, prefix: 'a-', model: 'walker' },
    }) as Record<string, unknown>;

  it('a config and the --steps flag accept exactly 1..MAX_STEPS', () => {
    expect(resolveConfig({ ...base(), steps: MAX_STEPS }).steps).toBe(MAX_STEPS);
    expect(readStepsFlag(String(MAX_STEPS))).toBe(MAX_STEPS);
    expect(refusal(() => resolveConfig({ ...base(), steps: MAX_STEPS + 1 })).field).toBe('steps');
    expect(refusal(() => readStepsFlag(String(MAX_STEPS + 1))).field).toBe('--steps');
  });

  it('every deadline accepts 2^31-1 and refuses one more', () => {
    for (const d of ['startupMs', 'stepMs', 'captureMs']) {
      expect(resolveConfig({ ...base(), deadlines: { [d]: MAX_DEADLINE_MS } }).deadlines[d as 'stepMs']).toBe(
        MAX_DEADLINE_MS,
      );
      expect(refusal(() => resolveConfig({ ...base(), deadlines: { [d]: MAX_DEADLINE_MS + 1 } })).field).toBe(
        `deadlines.${d}`,
      );
    }
  });

  it('a real model module still passes the plan-time module check', () => {
    const plan = resolveConfig(
      { ...base(), agents: { count: 1, prefix: 'a-', model: './test/workers/fixtures/readme-model.ts' } },
      { baseDir: process.cwd() },
    );
    expect(plan.agents[0]!.model).toBe(resolve('test/workers/fixtures/readme-model.ts'));
    expect(loadConfig('examples/lif-pair.yaml').agents.map((a) => a.model)).toEqual(['lif', 'lif']);
  });
});
