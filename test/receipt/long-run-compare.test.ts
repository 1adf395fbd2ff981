// Comparing long runs in flat memory (receipt-view.ts): `detsim diff` and `detsim replay` of
// 20,000-step runs in a 64 MiB heap, where the receipts held whole do not fit (the code before
// this ran out of memory on them), DIFF=0 for a copy, the one changed decision named at its step;
// and the streamed comparisons held to the whole-receipt ones (the published table passed
// explicitly takes the whole path) on the same runs: hash, divergence, sensitivity probes,
// physical differences; a pass tells how far it has read.
import { spawnSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLI_MAIN } from '../cli-refusal.js';
import { tmpDir } from '../checkpoint/harness.js';
import { editTrace, traceLinesOf } from '../trace-read.js';
import { diagnose, diagnoseViews } from '../../coordinator/diff0/diagnosis.js';
import { physicalDifferences, sensitivityProbes } from '../../coordinator/diff0/self-checks.js';
import { FIELD_TABLE } from '../../coordinator/receipt/fields.js';
import { buildReceipt, readRunFiles, sealReceipt } from '../../coordinator/receipt/receipt.js';
import { hashView, runReceiptView, viewOf } from '../../coordinator/receipt/receipt-view.js';
import { rebasedReceipt } from '../../coordinator/receipt/rebase.js';

const STEPS = 20_000;
const CHANGED_AT = 15_000;
/** A heap the 20,000-step receipts held whole do not fit in (two of them take ~400 MiB). */
const SMALL_HEAP = ['--max-old-space-size=64'];

function cli(args: string[], heap: string[] = []) {
  return spawnSync(process.execPath, [...heap, CLI_MAIN, ...args], { encoding: 'utf8', timeout: 240_000 });
}

/** Change one agent's move at `step` in a copy of `runDir` (its receipt removed: another run, not a tampered one). */
function withChangedMove(runDir: string, to: string, step: number): { agentId: string; from: string; other: string } {
  cpSync(runDir, to, { recursive: true });
  rmSync(join(to, 'receipt.json'));
  const m = /"agentId":"([^"]+)","brainTicks":"[0-9]+","committedStep":"[0-9]+","decision":\{"move":"([a-z]+)"/.exec(
    traceLinesOf(to)[step]!,
  )!;
  const other = m[2] === 'north' ? 'south' : 'north';
  editTrace(to, (lines) =>
    lines.map((l, i) => (i === step ? l.replace(m[0], m[0].replace(`"move":"${m[2]}"`, `"move":"${other}"`)) : l)),
  );
  return { agentId: m[1]!, from: m[2]!, other };
}

describe('comparing long runs in flat memory', () => {
  const out = tmpDir('detsim-long-compare-');
  const a = join(out, 'forage-walkers-1');
  const copy = join(out, 'copy');
  const changed = join(out, 'changed');
  let move: { agentId: string; from: string; other: string };

  beforeAll(() => {
    const run = cli([
      'run',
      'examples/forage-walkers.yaml',
      '--steps',
      String(STEPS),
      '--set',
      'agents.count=4',
      '--out',
      out,
    ]);
    expect(run.status, run.stderr).toBe(0);
    cpSync(a, copy, { recursive: true });
    move = withChangedMove(a, changed, CHANGED_AT);
  }, 240_000);

  it(`detsim diff of two ${STEPS}-step runs in a 64 MiB heap: DIFF=0 for a copy; a changed decision named at its step`, () => {
    const same = cli(['diff', a, copy], SMALL_HEAP);
    expect(same.status, same.stderr).toBe(0);
    expect(same.stdout).toMatch(new RegExp(`^DIFF=0: the same run \\(ReproHash [0-9a-f]{16}, ${STEPS} steps\\)$`, 'm'));
    const differs = cli(['diff', a, changed], SMALL_HEAP);
    expect(differs.status, differs.stderr).toBe(1);
    expect(differs.stdout).toContain(
      `first divergence at step ${CHANGED_AT} (agent ${move.agentId}): steps[${CHANGED_AT}].behaviour.agents[agentId=${move.agentId}].decision.move: ${a} "${move.from}", ${changed} "${move.other}"`,
    );
    // The heap is small enough that holding the receipts fails: the comparison above streamed.
    const held = spawnSync(
      process.execPath,
      [
        ...SMALL_HEAP,
        '--input-type=module',
        '-e',
        `const m = await import('./dist/coordinator/receipt/receipt.js'); m.readRunFiles(${JSON.stringify(a)});`,
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(held.status).not.toBe(0);
    expect(held.stderr).toMatch(/heap out of memory/);
  }, 240_000);

  it(`detsim replay of a ${STEPS}-step run directory in a 64 MiB heap: both fresh runs DIFF=0 with it`, () => {
    const r = cli(['replay', a, '--runs', '2', '--out', join(out, 'replays')], SMALL_HEAP);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/PASS replay +\[audit_replay_stable\]/);
    expect(r.stdout).toMatch(/PASS sensitivity +\[audit_sensitivity_ok\]/);
    expect(r.stdout).toMatch(/PASS physical-diff +\[audit_physical_diff_ok\]/);
  }, 240_000);

  it('the streamed comparisons give what the whole receipts give (the published table passed explicitly holds them whole)', () => {
    const whole = { table: FIELD_TABLE };
    const [va, vc] = [runReceiptView(a), runReceiptView(changed)];
    expect(hashView(va).reproHash).toBe(sealReceipt(buildReceipt(readRunFiles(a))).reproHash);
    // A pass tells how far it has read (diff and replay print it every few seconds).
    const seen: [number, number][] = [];
    hashView(runReceiptView(a, (p) => seen.push([p.step, p.steps])));
    expect(seen).toEqual(Array.from({ length: Math.floor(STEPS / 1024) }, (_, i) => [(i + 1) * 1024, STEPS]));
    expect(hashView(va, whole).reproHash).toBe(hashView(va).reproHash);
    const streamed = diagnoseViews(va, vc);
    expect(streamed).toMatchObject({ part: 'step', step: String(CHANGED_AT), agentId: move.agentId, left: move.from });
    expect(diagnoseViews(va, vc, whole)).toEqual(streamed);
    expect(
      diagnose(rebasedReceipt(buildReceipt(readRunFiles(a))), rebasedReceipt(buildReceipt(readRunFiles(changed)))),
    ).toEqual(streamed);
    expect(diagnoseViews(va, runReceiptView(copy))).toBeNull();
    // One run stops short: the step count is named, streamed as held whole.
    const held = rebasedReceipt(buildReceipt(readRunFiles(a)));
    const short = { ...held, steps: held.steps.slice(0, 100) };
    const count = diagnoseViews(viewOf(held), viewOf(short));
    expect(count).toMatchObject({ part: 'steps-count', step: '100', left: STEPS, right: 100 });
    expect(count).toEqual(diagnose(held, short));
    const probes = sensitivityProbes(va);
    expect(probes.map((p) => p.field)).toEqual([
      'steps.0.behaviour.agents.0.decision.move',
      'run.masterSeed',
      `steps.${STEPS - 1}.behaviour.worldDigest`,
    ]);
    for (const p of probes) expect(p.after, p.field).not.toBe(p.before);
    expect(sensitivityProbes(va, whole)).toEqual(probes);
    const physical = physicalDifferences(va, runReceiptView(copy));
    expect(physical).toEqual([]); // a copy: nothing physical differs
    const replayed = join(out, 'replays');
    const fresh = runReceiptView(join(replayed, 'forage-walkers-1'));
    const differing = physicalDifferences(va, fresh);
    expect(differing).toContain('steps[].operational.wallTimeNs');
    expect(physicalDifferences(va, fresh, whole)).toEqual(differing);
  }, 240_000);
});
