// The plan rebuilt from a real run's run.json equals the plan the run started from, for every
// example in examples/ (issue 11 item 6). The comparison is a deep equality over the whole RunPlan
// object, so a planned field that run.json stops carrying (or the rebuild stops reading) fails here.
// Both users of the rebuild are covered: resume (readRunRecord) and replay (planFromRunRecord),
// and `detsim replay <run-dir>` of the lif-pair example (action fields) passes through the CLI.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readRunRecord } from '../../coordinator/checkpoint/run-record.js';
import { loadConfig } from '../../coordinator/config.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { planFromRunRecord } from '../../coordinator/diff0/replay.js';
import { defaultConfigs } from '../../coordinator/diff0/verify.js';
import { ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';
import { ensurePythonWorker, pythonWorkerSkip } from '../cross-lang/python-worker.js';
import { detsimCli } from '../cli-refusal.js';

const examples = defaultConfigs('examples');

/** Run an example to completion through the CLI; returns its run directory. */
function runExample(config: string): string {
  const out = mkdtempSync(join(tmpdir(), 'detsim-plan-'));
  const r = detsimCli(['run', config, '--out', out], 300_000);
  expect(r.status, r.stderr).toBe(0);
  return /^run directory +(.+)$/m.exec(r.stdout)![1]!;
}

describe('run.json records the whole plan', () => {
  it('there are examples, and they use the fields at stake (action fields, a mixed runtime)', () => {
    const plans = examples.map((c) => loadConfig(c));
    expect(plans.some((p) => p.agents.some((a) => a.actionFields !== null))).toBe(true);
    expect(plans.some((p) => p.workers.some((w) => w.runtime === 'rust'))).toBe(true);
  });

  for (const config of examples) {
    it(`${config}: the plan rebuilt from its run.json equals the plan from the config`, { timeout: 600_000 }, (ctx) => {
      // transportDefault is the one planned field run.json does not carry: it says how the config
      // chose its transport (for a --launcher given after it), a choice made before the run starts.
      const { transportDefault: _chosen, ...planned } = loadConfig(config);
      if (planned.workers.some((w) => w.runtime === 'rust')) {
        if (rustWorkerSkip) return ctx.skip(rustWorkerSkip);
        ensureRustWorker();
      }
      if (planned.workers.some((w) => w.runtime === 'python')) {
        if (pythonWorkerSkip) return ctx.skip(pythonWorkerSkip);
        ensurePythonWorker(); // also exports DETSIM_PYTHON for the CLI child
      }
      const runDir = runExample(config);
      const runJson = parseStrict(readFileSync(join(runDir, 'run.json')));
      expect(planFromRunRecord(runJson)).toStrictEqual(planned);
      expect(readRunRecord(runDir).plan).toStrictEqual(planned);
    });
  }

  it(
    'detsim replay <run-dir> of lif-pair (action fields) reproduces the recorded run: exit 0',
    { timeout: 600_000 },
    () => {
      const runDir = runExample('examples/lif-pair.yaml');
      const r = detsimCli(['replay', runDir, '--out', mkdtempSync(join(tmpdir(), 'detsim-plan-replay-'))], 300_000);
      expect(r.stdout).toMatch(/^PASS replay /m);
      expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    },
  );
});
