// A researcher's model whose state the codec cannot keep exactly, run as a user runs it (the built
// CLI, the model in a directory outside the checkout): the checkpoint is refused naming the path
// and never committed, the run stops at that boundary (exit 1) — never a committed checkpoint
// whose resume would be another run. And a model error quoting a lone surrogate still reaches the
// coordinator as the worker's error reply (shown with U+FFFD), not as a broken protocol after the
// step deadline.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { committedIds, detsim } from '../checkpoint/cli.js';
import { tmpDir } from '../checkpoint/harness.js';

const MODEL = (state: string, prepare = '') => `export default {
  kind: 'agent',
  modelVersion: 'lossy-v1',
  initialize: ({ seed }) => ({ rng: (seed >>> 0) || 1, ${state} }),
  prepare(s) {
    ${prepare}
    s.rng = (s.rng * 1103515245 + 12345) >>> 0;
    return { move: ['north', 'south', 'east', 'west'][s.rng % 4] };
  },
  commit() {},
  capture: (s) => ({ ...s }),
  restore: (d) => ({ ...d }),
};
`;

const CONFIG = `sessionId: lossy
masterSeed: "42"
steps: 60
stepHz: 60
environment: { id: forage, model: forage, params: { width: 8, height: 8, food: 4 } }
agents:
  - { id: a-0, model: ./lossy.mjs, actionFields: [move] }
`;

function study(model: string): string {
  const dir = join(tmpDir('detsim-lossy-'), 'lab');
  mkdirSync(dir);
  writeFileSync(join(dir, 'lossy.mjs'), model);
  writeFileSync(join(dir, 'study.yaml'), CONFIG);
  return dir;
}

describe('state the codec cannot keep exactly (CLI, a model outside the checkout)', () => {
  for (const [what, state, path] of [
    ['a lone surrogate in a string', "text: 'x\\uD800y'", 'state $.text: a string with a lone surrogate'],
    ['an own __proto__ key', 'o: JSON.parse(\'{"__proto__":1,"x":2}\')', 'state $.o: the key __proto__'],
    ['a cycle', 'o: (() => { const o = {}; o.self = o; return o; })()', 'state $.o.self: a cycle (it is $.o)'],
  ] as const) {
    it(`${what}: the checkpoint is refused naming the path, nothing committed, exit 1`, () => {
      const dir = study(MODEL(state));
      const r = detsim(['run', join(dir, 'study.yaml'), '--checkpoint-every', '20', '--out', join(dir, 'runs')]);
      expect(r.status, r.stdout + r.stderr).toBe(1);
      expect(r.stdout + r.stderr).toContain(path);
      expect(committedIds(join(dir, 'runs', 'lossy-1'))).toEqual([]);
    }, 120_000);
  }

  it('a model error quoting a lone surrogate is the worker’s error reply, shown with U+FFFD', () => {
    const dir = study(MODEL("text: 'x'", "throw new Error('bad \\uD800 value');"));
    const r = detsim(['run', join(dir, 'study.yaml'), '--out', join(dir, 'runs')]);
    expect(r.status, r.stdout + r.stderr).toBe(1);
    expect(r.stderr).toContain('bad \uFFFD value');
    expect(r.stderr).not.toContain('protocol');
  }, 120_000);
});
