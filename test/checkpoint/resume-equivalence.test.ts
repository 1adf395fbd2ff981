// The headline guarantee: a run checkpointed every 2 steps, killed with SIGKILL after its ledger
// shows a committed checkpoint, then `detsim resume` to step M, has the same behaviour traces as an
// uninterrupted run to M after rebasing only the epoch-derived fields, and the same summary
// behaviourDigest. Both examples, through the real CLI, real workers and real files. The
// comparison is shown to be able to fail: without the rebase, and with a tampered trace.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalBehaviour, compareBehaviours } from '../../coordinator/trace/trace.js';
import { committedIds, detsim, runAndKill, summary, traces } from './cli.js';
import { tmpDir } from './harness.js';

const cases: [string, string, string, number][] = [
  ['lif-pair', 'examples/lif-pair.yaml', 'lif-pair-1', 8],
  ['forage-walkers', 'examples/forage-walkers.yaml', 'forage-walkers-1', 6],
];

describe.each(cases)('resume-equivalence (%s)', (_name, example, dirName, M) => {
  it(`[LOCK-18, STORE-20] SIGKILL after a committed checkpoint, resume to ${M}: same behaviour after the epoch rebase, same digest`, async () => {
    const a = tmpDir('detsim-eq-a-');
    const b = tmpDir('detsim-eq-b-');
    const plain = detsim(['run', example, '--steps', String(M), '--out', a]);
    expect(plain.status, plain.stderr).toBe(0);
    const aDir = join(a, dirName);

    // The killed run is planned much longer than M so that it is still running when killed.
    const bDir = join(b, dirName);
    const { killed } = await runAndKill(
      // --keep: a fast run may commit past ckpt-e1-2 before the kill lands; it must still be listed.
      ['run', example, '--steps', '400', '--checkpoint-every', '2', '--keep', '100', '--out', b],
      bDir,
      (d) => committedIds(d).includes('ckpt-e1-2'),
    );
    expect(killed).toBe(true);
    expect(existsSync(join(bDir, 'summary.json'))).toBe(false);

    const r = detsim(['resume', bDir, '--checkpoint', 'ckpt-e1-2', '--steps', String(M)]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/restored\s+ckpt-e1-2 at boundary 2 into epoch e2/);
    expect(r.stderr).toMatch(new RegExp(`step ${M}/${M}`));

    const expected = traces(aDir).map((t) => t.behaviour);
    const actual = traces(bDir).map((t) => t.behaviour);
    expect(actual).toHaveLength(M);
    expect(actual.slice(0, 2).every((x) => x.scope.epoch === 'e1')).toBe(true);
    expect(actual.slice(2).every((x) => x.scope.epoch === 'e2')).toBe(true);
    expect(compareBehaviours(expected, actual)).toBeNull();
    expect(summary(bDir).behaviourDigest).toBe(summary(aDir).behaviourDigest);
    expect(summary(bDir).stepsDone).toBe(M);
    expect(summary(bDir).resume).toMatchObject({
      checkpointId: 'ckpt-e1-2',
      boundary: '2',
      fromEpoch: 'e1',
      epoch: 'e2',
    });

    // The comparison can fail: without the rebase the resumed steps differ (epoch, batchId) ...
    expect(canonicalBehaviour(actual[2]!)).not.toBe(canonicalBehaviour(expected[2]!));
    // ... and a tampered resumed step is caught after the rebase.
    const tampered = actual.map((x) => structuredClone(x));
    tampered[M - 1]!.controlDigest = '0'.repeat(64);
    const diff = compareBehaviours(expected, tampered);
    expect(diff).not.toBeNull();
    expect(diff!.path).toBe('controlDigest');

    // The ledger stays a valid chain across the kill and the resume; every listed generation verifies.
    expect(detsim(['ledger', 'verify', bDir]).status).toBe(0);
    expect(detsim(['store', 'verify', join(bDir, 'store')]).status).toBe(0);
  }, 300_000);
});
