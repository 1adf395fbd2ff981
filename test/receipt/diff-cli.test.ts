// `detsim diff` over real run directories: two runs of one config are DIFF=0 (exit 0); a run whose
// trace was changed in one decision is DIFF≠0 (exit 1) naming the step, agent, field and both
// values; physical differences (pids, times) never count; a missing directory is refused (exit 2).
// A changed trace beside the receipt.json that binds it is refused as tampered (exit 1) before any diff;
// a receipt.json that records another ReproHash than its files give is refused (diff) or fails replay.
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detsim } from '../checkpoint/cli.js';
import { tmpDir } from '../checkpoint/harness.js';
import { editTrace, traceLinesOf } from '../trace-read.js';

describe('detsim diff', () => {
  it('[DIFF-4] two runs are DIFF=0; one changed decision is named; a missing run is refused', () => {
    const out = tmpDir('detsim-diff-');
    for (let i = 0; i < 2; i++)
      expect(detsim(['run', 'examples/forage-walkers.yaml', '--steps', '4', '--out', out]).status).toBe(0);
    const [a, b] = [join(out, 'forage-walkers-1'), join(out, 'forage-walkers-2')];
    // The two runs differ physically (pids, wall times) and still are the same run.
    expect(traceLinesOf(a)).not.toEqual(traceLinesOf(b));
    const same = detsim(['diff', a, b]);
    expect(same.status, same.stderr).toBe(0);
    expect(same.stdout).toMatch(/^DIFF=0: the same run \(ReproHash [0-9a-f]{16}, 4 steps\)$/m);

    const changed = join(out, 'changed');
    cpSync(b, changed, { recursive: true });
    const m = /"agentId":"([^"]+)","brainTicks":"[0-9]+","committedStep":"3","decision":\{"move":"([a-z]+)"/.exec(
      traceLinesOf(changed)[2]!,
    );
    expect(m).not.toBeNull();
    const other = m![2] === 'north' ? 'south' : 'north';
    editTrace(changed, (lines) =>
      lines.map((l, i) => (i === 2 ? l.replace(m![0], m![0].replace(`"move":"${m![2]}"`, `"move":"${other}"`)) : l)),
    );
    const bound = detsim(['diff', a, changed]);
    expect(bound.status).toBe(1); // a file that failed verification
    expect(bound.stderr).toMatch(
      /^detsim: \[audit_trace_segment_tampered\] .*trace\/000000\.jsonl\.gz: segment 0's bytes differ/m,
    );
    // Without the receipt that bound it, the changed trace is another run: diagnosed, not refused.
    rmSync(join(changed, 'receipt.json'));
    const diff = detsim(['diff', a, changed]);
    expect(diff.status).toBe(1);
    expect(diff.stdout).toContain(
      `first divergence at step 2 (agent ${m![1]}): steps[2].behaviour.agents[agentId=${m![1]}].decision.move: ${a} "${m![2]}", ${changed} "${other}"`,
    );
    const json = JSON.parse(detsim(['diff', a, changed, '--json']).stdout) as {
      same: boolean;
      divergence: { step: string; agentId: string };
    };
    expect(json).toMatchObject({ same: false, divergence: { step: '2', agentId: m![1] } });

    const missing = detsim(['diff', a, join(out, 'nope')]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/^detsim: \[struct_invalid_receipt\] .*nope\/run.json: run.json is missing$/m);
    // A run that has not ended (still running, or killed) has no summary.json: said so, with the way on.
    const unended = join(out, 'unended');
    cpSync(a, unended, { recursive: true });
    rmSync(join(unended, 'summary.json'));
    // With its receipt.json still there the run did end: summary.json was lost, and that is what is said.
    const lost = detsim(['diff', a, unended]);
    expect(lost.status).toBe(2);
    expect(lost.stderr.trim()).toBe(
      `detsim: [struct_invalid_receipt] ${join(unended, 'summary.json')}: summary.json is missing, though receipt.json says the run ended: it was removed or not copied along (copy it back from where the run was made)`,
    );
    rmSync(join(unended, 'receipt.json'));
    const live = detsim(['diff', a, unended]);
    expect(live.status).toBe(2);
    expect(live.stderr.trim()).toBe(
      `detsim: [struct_invalid_receipt] ${join(unended, 'summary.json')}: summary.json is missing: the run has not ended (it is still running, or it was killed: \`detsim resume ${unended}\` finishes it from its last checkpoint)`,
    );
  }, 240_000);

  it('a receipt.json that records another ReproHash than its run gives is refused (diff, exit 1) and fails replay', () => {
    const out = tmpDir('detsim-diff-receipt-');
    expect(detsim(['run', 'examples/forage-walkers.yaml', '--steps', '4', '--out', out]).status).toBe(0);
    const a = join(out, 'forage-walkers-1');
    const edited = join(out, 'edited');
    cpSync(a, edited, { recursive: true });
    const file = join(edited, 'receipt.json');
    const receipt = JSON.parse(readFileSync(file, 'utf8')) as { reproHash: string };
    const real = receipt.reproHash;
    const fake = `${real.slice(0, 15)}${real.endsWith('0') ? '1' : '0'}`;
    writeFileSync(file, readFileSync(file, 'utf8').replace(real, fake));
    const said = `${file} records ReproHash ${fake}, and the run's trace, run.json and summary.json give ${real}: a file of the run was changed after its receipt was written (or a resume of it has not ended)`;
    for (const args of [
      [edited, a],
      [a, edited],
    ]) {
      const r = detsim(['diff', ...args]);
      expect(r.status).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim()).toBe(`detsim: [audit_report_receipt_differs] ${said}`);
    }
    expect(detsim(['diff', a, a]).status).toBe(0); // control: an unedited receipt agrees
    // A run.json that is no run record (a field removed) is refused naming it, not compared.
    const broken = join(out, 'broken');
    cpSync(a, broken, { recursive: true });
    const run = JSON.parse(readFileSync(join(broken, 'run.json'), 'utf8')) as Record<string, unknown>;
    delete run.masterSeed;
    writeFileSync(join(broken, 'run.json'), JSON.stringify(run));
    const refused = detsim(['diff', a, broken]);
    expect(refused.status).toBe(2);
    expect(refused.stderr.trim()).toMatch(
      new RegExp(`^detsim: \\[struct_invalid_field\\] ${join(broken, 'run.json')}: masterSeed: `),
    );
    const replay = detsim(['replay', edited, '--out', join(out, 'replays')]);
    expect(replay.status).toBe(1);
    expect(replay.stdout).toContain(
      `FAIL receipt       [audit_report_receipt_differs] {"file":${JSON.stringify(file)},"recomputed":"${real}","recorded":"${fake}"}`,
    );
  }, 240_000);
});
