// `detsim run --set path=value` and `--master-seed N` through the built CLI with real workers: an
// override gives the very run an edited config gives (the same ReproHash: run.json's `overrides`
// list is physical, the composition it resolved to is hashed), it is recorded in run.json, a path the
// config does not have is refused in one line before anything is written, and every run ends with
// its wall time, rate and reward totals (stdout, --json, summary.json), the totals those of its trace.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rewardTotalsOnDisk } from '../../coordinator/session/metrics.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { deriveSeed } from '../../core/formats/seed.js';
import { detsimCli, expectCliRefusal } from '../cli-refusal.js';
import { readRun, tmpOut } from './helpers.js';

const EXAMPLE = 'examples/forage-walkers.yaml';

interface RunJsonOut {
  runDir: string;
  reproHash: string;
  behaviourDigest: string;
  steps: number;
  wallTimeMs: number;
  stepsPerSecond: number;
  rewards: { total: number; perAgent: Record<string, number> };
}

function runJson(args: string[]): RunJsonOut {
  const r = detsimCli(['run', ...args, '--json'], 110_000);
  expect(r.status, r.stderr).toBe(0);
  return parseStrict(r.stdout.trim()) as unknown as RunJsonOut;
}

/** Reward totals summed from the trace on disk, per agent and overall. */
function traceRewards(dir: string): { total: number; perAgent: Record<string, number> } {
  const perAgent: Record<string, number> = {};
  let total = 0;
  for (const t of readRun(dir).traces)
    for (const r of t.behaviour.rewards) {
      perAgent[r.agentId] = (perAgent[r.agentId] ?? 0) + r.value;
      total += r.value;
    }
  return { total, perAgent };
}

describe('detsim run --set (CLI)', () => {
  it('--set gives the same ReproHash as the same change written in the config, and run.json records it', () => {
    const work = tmpOut('detsim-set-');
    const edited = join(work, 'food30.yaml');
    const text = readFileSync(EXAMPLE, 'utf8');
    expect(text).toContain('food: 24');
    writeFileSync(edited, text.replace('food: 24', 'food: 30'));

    const set = runJson([
      EXAMPLE,
      '--set',
      'environment.params.food=30',
      '--set',
      'steps=60',
      '--out',
      join(work, 'a'),
    ]);
    const r = detsimCli(['run', edited, '--steps', '60', '--out', join(work, 'b')], 110_000);
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toContain(`repro hash       ${set.reproHash}`);
    expect(lines).toContain(`behaviour digest ${set.behaviourDigest}`);
    const plain = runJson([EXAMPLE, '--steps', '60', '--out', join(work, 'c')]);
    // The override changed the run: it is not the unedited example's.
    expect(plain.reproHash).not.toBe(set.reproHash);

    const recorded = readRun(set.runDir).run;
    expect(recorded.overrides).toEqual([
      { path: 'environment.params.food', value: 30 },
      { path: 'steps', value: 60 },
    ]);
    expect((recorded.environment as { params: unknown }).params).toEqual({ width: 24, height: 24, food: 30 });
    const byConfig = join(work, 'b', 'forage-walkers-1');
    expect(readRun(byConfig).run.overrides).toBeUndefined();
    const diff = detsimCli(['diff', set.runDir, byConfig]);
    expect(diff.status, diff.stdout).toBe(0);
    expect(diff.stdout).toMatch(/^DIFF=0/);
  }, 240_000);

  it('--master-seed N sets the master seed every seed derives from, recorded as an override', () => {
    const out = tmpOut('detsim-seed-');
    const r = runJson([EXAMPLE, '--master-seed', '12345', '--set', 'steps=3', '--out', out]);
    const rec = readRun(r.runDir).run as { masterSeed: string; agents: { agentId: string; seed: number }[] };
    expect(rec.masterSeed).toBe('12345');
    expect(rec.agents[3]!.seed).toBe(deriveSeed('12345', rec.agents[3]!.agentId));
    expect(readRun(r.runDir).run.overrides).toEqual([
      { path: 'steps', value: 3 },
      { path: 'masterSeed', value: '12345' },
    ]);
  }, 120_000);

  it('a path the config does not have, or a bad value, is one line, exit 2, and no run directory', () => {
    const out = tmpOut('detsim-set-refused-');
    const runs = join(out, 'runs');
    const line = expectCliRefusal(
      detsimCli(['run', EXAMPLE, '--set', 'environment.parms.food=3', '--out', runs]),
      'struct_override_path',
      '--set environment.parms.food: no such config field',
    );
    expect(line).toContain('unknown field "parms"');
    expectCliRefusal(
      detsimCli(['run', EXAMPLE, '--set', 'agents.count=0', '--out', runs]),
      'struct_invalid_field',
      'agents.count:',
    );
    expectCliRefusal(
      detsimCli(['run', EXAMPLE, '--master-seed', '-1', '--out', runs]),
      'struct_invalid_u64',
      'masterSeed:',
    );
    expectCliRefusal(
      detsimCli(['run', EXAMPLE, '--steps', '5', '--set', 'steps=6', '--out', runs]),
      'struct_invalid_field',
      '--steps: give either',
    );
    expect(existsSync(runs) ? readdirSync(runs) : []).toEqual([]);
  });

  it('a run ends with its wall time, rate and reward totals: stdout, --json and summary.json, the totals its trace holds', () => {
    const out = tmpOut('detsim-metrics-');
    const r = detsimCli(['run', EXAMPLE, '--steps', '80', '--out', out], 110_000);
    expect(r.status, r.stderr).toBe(0);
    const dir = join(out, 'forage-walkers-1');
    const { summary } = readRun(dir);
    const fromTrace = traceRewards(dir);
    expect(fromTrace.total).toBeGreaterThan(0);
    expect(Object.keys(summary.rewards as object)).toEqual(['perAgent', 'total']);
    // Every agent is listed (0 when it ate nothing), in port order, with the trace's totals.
    const perAgent = (summary.rewards as { perAgent: Record<string, number> }).perAgent;
    expect(Object.keys(perAgent)).toHaveLength(16);
    for (const [agent, v] of Object.entries(perAgent)) expect(v, agent).toBe(fromTrace.perAgent[agent] ?? 0);
    expect((summary.rewards as { total: number }).total).toBe(fromTrace.total);
    // What a resumed run reads back (only each line's rewards array): the same totals, to the bit.
    expect(rewardTotalsOnDisk(dir, Object.keys(perAgent))).toEqual(summary.rewards);
    expect(summary.stepsPerSecond).toBeGreaterThan(0);
    expect(summary.wallTimeMs).toBeGreaterThan(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toContainEqual(
      expect.stringMatching(/^wall time {8}[0-9]+\.[0-9] s \([0-9]+\.[0-9] steps\/s stepping\)$/),
    );
    expect(lines).toContain(
      `rewards          total ${fromTrace.total}; per agent: ${Object.entries(perAgent)
        .map(([a, v]) => `${a} ${v}`)
        .join(', ')}`,
    );
    const json = runJson([EXAMPLE, '--steps', '80', '--out', out]);
    expect(json.rewards).toEqual(summary.rewards);
    expect(json.stepsPerSecond).toBeGreaterThan(0);
    expect(json.wallTimeMs).toBeGreaterThan(0);
  }, 240_000);
});
