// `detsim diff` over real run directories: two runs of one config are DIFF=0 (exit 0); a run whose
// trace was changed in one decision is DIFF≠0 (exit 1) naming the step, agent, field and both
// values; physical differences (pids, times) never count; a missing directory is refused (exit 2).
// A changed trace beside the receipt.json that binds it is refused as tampered (exit 2) before any diff.
import { cpSync, rmSync } from 'node:fs';
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
    expect(bound.status).toBe(2);
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
    const live = detsim(['diff', a, unended]);
    expect(live.status).toBe(2);
    expect(live.stderr.trim()).toBe(
      `detsim: [struct_invalid_receipt] ${join(unended, 'summary.json')}: summary.json is missing: the run has not ended (it is still running, or it was killed: \`detsim resume ${unended}\` finishes it from its last checkpoint)`,
    );
  }, 240_000);
});
