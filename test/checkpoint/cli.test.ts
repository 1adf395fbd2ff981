// The checkpoint CLI surface: `detsim run --checkpoint-every K --keep N` prints what committed;
// bad flags are refused with one line and exit 2; `detsim resume` refuses a run without a store
// (exit 2), an unknown checkpoint id, and a damaged generation (exit 1, the check named) without
// changing anything in the run directory; a resumed run's store keeps the N the run recorded.
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detsim } from './cli.js';
import { tmpDir } from './harness.js';
import { traceFingerprint } from '../trace-read.js';

describe('detsim run --checkpoint-every / detsim resume (CLI)', () => {
  it('prints the committed count, keeps N, and resume refuses what it must without touching the run', () => {
    const out = tmpDir('detsim-ckcli-');
    const r = detsim([
      'run',
      'examples/lif-pair.yaml',
      '--steps',
      '8',
      '--checkpoint-every',
      '2',
      '--keep',
      '2',
      '--checkpoint-wait', // every boundary taken, however fast the steps and slow the fsyncs
      '--out',
      out,
    ]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^checkpoints\s+4 committed of 4 captured \(every 2 steps, keep 2, high-water ckpt-e1-8\)$/m,
    );
    expect(r.stderr).toMatch(/checkpoint ckpt-e1-8 committed \(boundary 8\)/);
    const runDir = join(out, 'lif-pair-1');
    const store = JSON.parse(readFileSync(join(runDir, 'store', 'manifest.json'), 'utf8')) as {
      generations: { checkpointId: string }[];
    };
    expect(store.generations.map((g) => g.checkpointId)).toEqual(['ckpt-e1-6', 'ckpt-e1-8']);

    // A damaged generation: resume refuses naming the check (exit 1), nothing in the run changes.
    const damaged = join(out, 'damaged');
    cpSync(runDir, damaged, { recursive: true });
    const gen = join(damaged, 'store', 'ckpt-e1-8.flysess');
    const bytes = readFileSync(gen);
    bytes[200]! ^= 0x01;
    writeFileSync(gen, bytes);
    const trace = traceFingerprint(damaged);
    const summary = readFileSync(join(damaged, 'summary.json'), 'utf8');
    const bad = detsim(['resume', damaged, '--steps', '8']);
    expect(bad.status).toBe(1);
    expect(bad.stderr.trim().split('\n').at(-1)).toMatch(
      /^detsim: \[audit_envelope_digest\] checkpoint refused: ckpt-e1-8: .*check 2 \(footer digest\)/,
    );
    expect(traceFingerprint(damaged)).toBe(trace);
    expect(readFileSync(join(damaged, 'summary.json'), 'utf8')).toBe(summary);
    expect(readdirSync(join(damaged, 'trace')).filter((f) => f.startsWith('abandoned-'))).toEqual([]);

    // A trace index whose saved digest states were edited: refused, untouched (the kept entries
    // no longer hash to the index digest the checkpoint's capture recorded in the ledger).
    const edited = join(out, 'edited');
    cpSync(runDir, edited, { recursive: true });
    const index = join(edited, 'trace', 'index.jsonl');
    writeFileSync(index, readFileSync(index, 'utf8').replace(/"h":"[0-9a-f]{64}"/g, `"h":"${'0'.repeat(64)}"`));
    const editedTrace = traceFingerprint(edited);
    const mismatch = detsim(['resume', edited, '--checkpoint', 'ckpt-e1-6']);
    expect(mismatch.status).toBe(1);
    expect(mismatch.stderr.trim().split('\n').at(-1)).toMatch(
      /^detsim: \[audit_trace_segment_tampered\] .*index\.jsonl: its [0-9]+ entries before step 6 differ from those recorded in ledger\.jsonl when ckpt-e1-6 was captured$/,
    );
    expect(traceFingerprint(edited)).toBe(editedTrace);

    const unknown = detsim(['resume', runDir, '--checkpoint', 'ckpt-e1-1']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/^detsim: \[ident_checkpoint_unknown\] /m);

    // The undamaged run resumes from its older generation.
    const ok = detsim(['resume', runDir, '--checkpoint', 'ckpt-e1-6']);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/restored\s+ckpt-e1-6 at boundary 6 into epoch e2 \(2 later steps abandoned\)/);
    // The resumed run's store rotates to the keep the run recorded (2), as its summary line says.
    expect(ok.stdout).toMatch(
      /^checkpoints\s+1 committed of 1 captured \(every 2 steps, keep 2, high-water ckpt-e2-8\)$/m,
    );
    const resumedStore = JSON.parse(readFileSync(join(runDir, 'store', 'manifest.json'), 'utf8')) as {
      generations: { checkpointId: string }[];
    };
    expect(resumedStore.generations.map((g) => g.checkpointId)).toEqual(['ckpt-e1-8', 'ckpt-e2-8']);
  }, 300_000);

  it('--checkpoint-wait takes a checkpoint after every step of a fast run: each one committed, none skipped', () => {
    const out = tmpDir('detsim-ckcli-');
    const r = detsim([
      'run',
      'examples/lif-pair.yaml',
      '--steps',
      '12',
      '--checkpoint-every',
      '1',
      '--checkpoint-wait',
      '--out',
      out,
    ]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^checkpoints\s+12 committed of 12 captured \(every 1 steps, keep 3, high-water ckpt-e1-12\)$/m,
    );
    expect(r.stdout).not.toMatch(/not taken/);
  }, 300_000);

  it('refuses bad flags and a run directory without a store (exit 2, one line)', () => {
    const out = tmpDir('detsim-ckcli-');
    const keepAlone = detsim(['run', 'examples/lif-pair.yaml', '--keep', '2', '--out', out]);
    expect(keepAlone.status).toBe(2);
    expect(keepAlone.stderr.trim()).toMatch(
      /^detsim: \[struct_invalid_field\] --keep: only meaningful with --checkpoint-every$/,
    );
    const waitAlone = detsim(['run', 'examples/lif-pair.yaml', '--checkpoint-wait', '--out', out]);
    expect(waitAlone.status).toBe(2);
    expect(waitAlone.stderr.trim()).toMatch(
      /^detsim: \[struct_invalid_field\] --checkpoint-wait: only meaningful with --checkpoint-every$/,
    );
    const zero = detsim(['run', 'examples/lif-pair.yaml', '--checkpoint-every', '0', '--out', out]);
    expect(zero.status).toBe(2);
    expect(zero.stderr.trim()).toMatch(
      /^detsim: \[struct_invalid_field\] --checkpoint-every: "0" is not a positive whole number$/,
    );
    expect(existsSync(join(out, 'lif-pair-1'))).toBe(false);
    const plain = detsim(['run', 'examples/lif-pair.yaml', '--steps', '1', '--out', out]);
    expect(plain.status, plain.stderr).toBe(0);
    const noStore = detsim(['resume', join(out, 'lif-pair-1')]);
    expect(noStore.status).toBe(2);
    expect(noStore.stderr.trim()).toMatch(/^detsim: \[struct_run_record\] .*no checkpoint store/);
  }, 300_000);
});
