// The trace on disk (coordinator/trace/trace-store.ts): the segmented writer rotates and compresses, the
// one reader reads both formats and checks each segment's digest, a receipt binds its trace by
// digest (tampered / missing / reordered segments refused with their reason codes), the saved
// SHA-256 state continues the behaviour digest, and a resume near the end opens only the last
// segment. The end-to-end part runs real workers: the forage-walkers golden reproduces with a
// segmented trace, its receipt grows by far less than 100 bytes per step, and `detsim diff`
// refuses a damaged segment naming it. Unit parts write real files, no workers.
import { createHash } from 'node:crypto';
import { cpSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { canonicalize, sha256Hex } from '../../core/formats/canonical-json.js';
import { describe, expect, it } from 'vitest';
import { HashedBehaviour } from '../../coordinator/checkpoint/group.js';
import { readReceipt, writeReceipt } from '../../coordinator/receipt/receipt.js';
import { runSession } from '../../coordinator/session/run.js';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import { resumeRun } from '../../coordinator/checkpoint/resume.js';
import { Sha256Stream } from '../../coordinator/trace/sha256-state.js';
import { BehaviourDigest, canonicalBehaviour, type TraceBehaviour } from '../../coordinator/trace/trace.js';
import {
  checkTraceBinding,
  indexDigestOf,
  readTrace,
  readReproTexts,
  readTraceIndex,
  readTraceSync,
  SegmentedTraceWriter,
  stageSegmentedCut,
  traceBindingOf,
  traceBytesOnDisk,
  traceFormatOf,
  truncateSegmentedTrace,
} from '../../coordinator/trace/trace-store.js';
import { detsim } from '../checkpoint/cli.js';
import { tmpDir } from '../checkpoint/harness.js';
import { refusal } from '../refusal.js';

/** A small behaviour for step `k` (epoch e1): what the writer hashes, in canonical form. */
function behaviour(k: number): TraceBehaviour {
  return {
    scope: { sessionId: 's', epoch: 'e1', step: String(k) },
    agents: [],
    batchId: `batch-e1-${k}`,
    controlDigest: 'c',
    acknowledgedBoundary: String(k),
    observationDigest: 'o',
    worldDigest: `w${k}`,
    rewards: [],
    eventIds: [],
    publishedBoundary: String(k + 1),
  } as unknown as TraceBehaviour;
}

function lineOf(k: number): { line: string; text: string } {
  const text = canonicalBehaviour(behaviour(k));
  return { line: `{"behaviour":${text},"operational":{"wallTimeNs":"${k}"}}`, text };
}

/** Write `n` steps in segments of `per` through the real writer, syncing once in the middle. */
async function writeSteps(dir: string, n: number, per: number): Promise<void> {
  const w = new SegmentedTraceWriter(dir, { segmentSteps: per });
  for (let k = 0; k < n; k++) {
    const { line, text } = lineOf(k);
    const p = w.appendLine(line, text);
    if (p) await p;
    if (k === Math.floor(n / 2)) await w.sync();
  }
  await w.close();
}

describe('SHA-256 with a saved state', () => {
  it('continues from a saved state to the digest node:crypto computes in one go', () => {
    for (const n of [0, 1, 55, 56, 64, 65, 1000]) {
      const bytes = createHash('sha512').update(String(n)).digest().toString('hex').repeat(8).slice(0, n);
      const s = new Sha256Stream().update(bytes.slice(0, n >> 1));
      const resumed = Sha256Stream.from(JSON.parse(JSON.stringify(s.state())));
      expect(resumed.update(bytes.slice(n >> 1)).digest()).toBe(createHash('sha256').update(bytes).digest('hex'));
    }
  });
});

describe('segmented trace: writer and reader', () => {
  it('rotates segments, syncs a partial one, and reads back every line in order (sync and async)', async () => {
    const dir = tmpDir('detsim-trace-');
    await writeSteps(dir, 23, 5);
    expect(traceFormatOf(dir)).toBe('segments');
    const index = readTraceIndex(dir);
    // 0-4, 5-9, 10-11 (sealed by sync after step 11), 12-16, 17-21, 22.
    expect(index.map((s) => [s.firstStep, s.steps])).toEqual([
      ['0', 5],
      ['5', 5],
      ['10', 2],
      ['12', 5],
      ['17', 5],
      ['22', 1],
    ]);
    const steps = [...readTraceSync(dir)].map((t) => t.behaviour.scope.step);
    expect(steps).toEqual(Array.from({ length: 23 }, (_, k) => String(k)));
    const viaAsync: string[] = [];
    for await (const t of readTrace(dir)) viaAsync.push(t.behaviour.scope.step);
    expect(viaAsync).toEqual(steps);
    // The index's saved state is the behaviour digest's over the steps so far, as a group hashes it.
    const hashed = new HashedBehaviour('e1');
    const digest = new BehaviourDigest();
    for (let k = 0; k < 23; k++) {
      hashed.add(behaviour(k));
      digest.add(behaviour(k));
    }
    const last = index[index.length - 1]!.after!;
    expect(last).toEqual({ digest: hashed.prefix().state });
    expect(new BehaviourDigest({ state: last.digest, steps: 23 }).digest()).toBe(digest.digest());
  });

  it('reads the old trace.jsonl through the same reader', () => {
    const dir = tmpDir('detsim-trace-');
    writeFileSync(join(dir, 'trace.jsonl'), `${lineOf(0).line}\n${lineOf(1).line}\n`);
    expect(traceFormatOf(dir)).toBe('jsonl');
    expect([...readTraceSync(dir)].map((t) => t.behaviour.worldDigest)).toEqual(['w0', 'w1']);
    expect(traceBindingOf(dir)).toMatchObject({ format: 'detsim-trace-jsonl-v1', steps: 2 });
  });

  it('a cut near the end opens only the segment it straddles; at a segment boundary none', async () => {
    const dir = tmpDir('detsim-trace-');
    await writeSteps(dir, 40, 4);
    const opened: string[] = [];
    const onOpen = (p: string) => opened.push(p);
    const text = (l: string) => canonicalBehaviour((JSON.parse(l) as { behaviour: TraceBehaviour }).behaviour);
    const last = readTraceIndex(dir).at(-1)!;
    const boundary = BigInt(last.firstStep);
    const atBoundary = stageSegmentedCut(dir, boundary, text, { onOpen });
    expect(opened).toEqual([]);
    expect(atBoundary.keptSteps).toBe(boundary);
    const straddling = stageSegmentedCut(dir, boundary + 1n, text, { onOpen });
    expect(opened.map((p) => p.split('/').pop())).toEqual([last.segment]);
    const hashed = new HashedBehaviour('e1');
    for (let k = 0n; k <= boundary; k++) hashed.add(behaviour(Number(k)));
    expect(straddling.hashes.digest).toEqual(hashed.prefix().state);
    for (const c of [atBoundary, straddling]) for (const f of c.staged) rmSync(f.tmp, { force: true });
    // Reading from a step skips whole earlier segments too.
    opened.length = 0;
    expect([...readTraceSync(dir, { fromStep: boundary, onOpen })].length).toBe(last.steps);
    expect(opened.length).toBe(1);
  });

  it("resume's check of the kept segments: their bytes and the index digest a capture recorded; without one, every kept step hashed again", async () => {
    const dir = tmpDir('detsim-trace-');
    await writeSteps(dir, 40, 4);
    const text = (l: string) => canonicalBehaviour((JSON.parse(l) as { behaviour: TraceBehaviour }).behaviour);
    const boundary = BigInt(readTraceIndex(dir).at(-1)!.firstStep);
    const kept = readTraceIndex(dir).filter((s) => BigInt(s.firstStep) + BigInt(s.steps) <= boundary);
    // What a capture records is the writer's running digest, the same as one computed from the file.
    const w = new SegmentedTraceWriter(dir);
    expect(w.indexDigest()).toBe(indexDigestOf(readTraceIndex(dir)));
    await w.close();
    const recorded = indexDigestOf(kept);
    const cut = (opts: Parameters<typeof stageSegmentedCut>[3]) => {
      const c = stageSegmentedCut(dir, boundary, text, opts);
      for (const f of c.staged) rmSync(f.tmp, { force: true });
      return c.keptSteps;
    };
    const opened: string[] = [];
    expect(cut({ verifyKept: 'bytes', keptIndexDigest: recorded, onOpen: (p) => opened.push(p) })).toBe(boundary);
    expect(opened.length).toBe(kept.length);
    expect(cut({ verifyKept: 'full' })).toBe(boundary);
    // An entry's saved digest state edited (its bytes still match): the recorded digest, or hashing the steps again, refuses it.
    const path = join(dir, 'trace', 'index.jsonl');
    const original = readFileSync(path, 'utf8');
    const lines = original.split('\n');
    const e = JSON.parse(lines[1]!) as { after: { digest: { h: string } } };
    e.after.digest.h = 'c'.repeat(64);
    writeFileSync(path, [lines[0], JSON.stringify(e), ...lines.slice(2)].join('\n'));
    expect(refusal(() => cut({ verifyKept: 'bytes', keptIndexDigest: recorded }))).toMatchObject({
      reason: 'audit_trace_segment_tampered',
      message: expect.stringMatching(
        /index\.jsonl: its [0-9]+ entries before step [0-9]+ differ from those recorded in the checkpoint$/,
      ),
    });
    expect(refusal(() => cut({ verifyKept: 'full' }))).toMatchObject({
      reason: 'audit_trace_segment_tampered',
      message: expect.stringMatching(
        /000001\.jsonl\.gz: its steps do not give the digest state index\.jsonl records after it$/,
      ),
    });
    writeFileSync(path, original);
    expect(cut({ verifyKept: 'full' })).toBe(boundary);
  });

  it('truncateSegmentedTrace rewinds to a step; a writer then continues the same hashes', async () => {
    const dir = tmpDir('detsim-trace-');
    await writeSteps(dir, 12, 5);
    expect(truncateSegmentedTrace(dir, 7n)).toBe(5);
    expect([...readTraceSync(dir)].length).toBe(7);
    const w = new SegmentedTraceWriter(dir, { segmentSteps: 5 });
    for (let k = 7; k < 12; k++) await w.appendLine(lineOf(k).line, lineOf(k).text);
    await w.close();
    const whole = tmpDir('detsim-trace-');
    await writeSteps(whole, 12, 5);
    const a = readTraceIndex(dir);
    const b = readTraceIndex(whole);
    expect(a[a.length - 1]!.after).toEqual(b[b.length - 1]!.after);
  });
});

describe('a receipt binds its trace by digest', () => {
  it('refuses a tampered, a missing and a reordered segment, each with its reason code', async () => {
    const dir = tmpDir('detsim-trace-');
    await writeSteps(dir, 12, 4);
    const bound = traceBindingOf(dir);
    checkTraceBinding(dir, bound);

    const tampered = tmpDir('detsim-trace-');
    cpSync(dir, tampered, { recursive: true });
    const t1 = join(tampered, 'trace', bound.segments[1]!.segment);
    writeFileSync(t1, Buffer.concat([readFileSync(t1), Buffer.from([0])]));
    const e1 = refusal(() => checkTraceBinding(tampered, bound));
    expect([e1.reason, e1.field]).toEqual(['audit_trace_segment_tampered', 'trace.segments[1]']);
    // The reader alone (index as the binding) refuses it too.
    expect(refusal(() => [...readTraceSync(tampered)]).reason).toBe('audit_trace_segment_tampered');

    const missing = tmpDir('detsim-trace-');
    cpSync(dir, missing, { recursive: true });
    rmSync(join(missing, 'trace', bound.segments[2]!.segment));
    const e2 = refusal(() => checkTraceBinding(missing, bound));
    expect([e2.reason, e2.field]).toEqual(['audit_trace_segment_missing', 'trace.segments[2]']);

    const reordered = tmpDir('detsim-trace-');
    cpSync(dir, reordered, { recursive: true });
    const r0 = join(reordered, 'trace', bound.segments[0]!.segment);
    const r1 = join(reordered, 'trace', bound.segments[1]!.segment);
    renameSync(r0, `${r0}.x`);
    renameSync(r1, r0);
    renameSync(`${r0}.x`, r1);
    const e3 = refusal(() => checkTraceBinding(reordered, bound));
    expect([e3.reason, e3.field]).toEqual(['audit_trace_segment_reordered', 'trace.segments[0]']);
    expect(e3.message).toMatch(/holds the bytes receipt\.json binds to segment 1, not those of segment 0/);
  });
});

/** A copy of a run directory with one step's repro text changed in segment `seg`'s repro file (index updated to match, or not). */
function withEditedReproFile(runDir: string, to: string, seg: number, indexToo: boolean): string {
  cpSync(runDir, to, { recursive: true });
  const index = readTraceIndex(to);
  const entry = index[seg]!.repro!;
  const path = join(to, 'trace', entry.file);
  const text = gunzipSync(readFileSync(path)).toString('utf8').replace('"walker-00"', '"walker-0X"');
  const bytes = gzipSync(Buffer.from(text, 'utf8'));
  writeFileSync(path, bytes);
  if (indexToo) {
    index[seg] = { ...index[seg]!, repro: { ...entry, bytes: bytes.length, sha256: sha256Hex(bytes) } };
    writeFileSync(join(to, 'trace', 'index.jsonl'), index.map((e) => `${canonicalize(e as never)}\n`).join(''));
  }
  return to;
}

/**
 * receipt.json's ReproHash is hashed from the repro files the sealing thread made (no step walked
 * again): one edited consistently with the index changes it (so they are what is hashed); one
 * that differs from the index's digest, or an index without repro files, falls back to walking the
 * trace and still gives the golden.
 */
function checkReceiptFromReproFiles(runDir: string, scratch: string, golden: string): void {
  const index = readTraceIndex(runDir);
  expect(index.every((s) => s.repro?.base === index[0]!.repro!.base)).toBe(true);
  expect(traceBytesOnDisk(runDir)).toBeGreaterThan(index.reduce((n, s) => n + s.bytes, 0));
  const edited = withEditedReproFile(runDir, join(scratch, 'edited'), 1, true);
  expect(writeReceipt(edited).reproHash).not.toBe(golden);
  const stale = withEditedReproFile(runDir, join(scratch, 'stale'), 1, false);
  expect(writeReceipt(stale).reproHash).toBe(golden);
  const old = join(scratch, 'no-repro');
  cpSync(runDir, old, { recursive: true });
  const bare = index.map(({ repro: _r, ...rest }) => `${canonicalize(rest as never)}\n`).join('');
  writeFileSync(join(old, 'trace', 'index.jsonl'), bare);
  expect(writeReceipt(old).reproHash).toBe(golden);
}

describe('segmented trace in a real run', () => {
  it('detsim run --segment-steps N seals a segment every N steps; 0 or a non-number is refused naming the flag', () => {
    const out = tmpDir('detsim-segment-steps-');
    const r = detsim(['run', 'examples/lif-pair.yaml', '--steps', '10', '--segment-steps', '4', '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    expect(readTraceIndex(join(out, 'lif-pair-1')).map((s) => s.steps)).toEqual([4, 4, 2]);
    for (const bad of ['0', 'four']) {
      const refused = detsim(['run', 'examples/lif-pair.yaml', '--segment-steps', bad, '--out', out]);
      expect(refused.status).toBe(2);
      expect(refused.stderr.trim()).toMatch(/^detsim: \[struct_invalid_field\] --segment-steps: /);
    }
  }, 120_000);

  it('the forage-walkers golden reproduces; the receipt binds, not copies, and hashes the repro files; diff refuses a damaged segment', async () => {
    const golden = JSON.parse(readFileSync('fixtures/golden/forage-walkers.json', 'utf8')) as {
      steps: number;
      reproHash: string;
      behaviourDigest: string;
    };
    const out = tmpDir('detsim-trace-run-');
    const r = await runSession('examples/forage-walkers.yaml', {
      outDir: out,
      steps: golden.steps,
      segmentSteps: 32,
      onWarning: () => undefined,
      logLevel: 'warn',
    });
    expect([r.reproHash, r.behaviourDigest]).toEqual([golden.reproHash, golden.behaviourDigest]);
    expect(readTraceIndex(r.runDir).map((s) => s.steps)).toEqual([32, 32, 32, 24]);
    const receipt = readReceipt(join(r.runDir, 'receipt.json'));
    expect(receipt.steps).toBeUndefined();
    expect(receipt.trace!.segments.length).toBe(4);
    // Receipt bytes beyond the run and summary it carries: well under 100 bytes per step.
    const receiptBytes = readFileSync(join(r.runDir, 'receipt.json')).length;
    const carried =
      readFileSync(join(r.runDir, 'run.json')).length + readFileSync(join(r.runDir, 'summary.json')).length;
    expect((receiptBytes - carried) / golden.steps).toBeLessThan(100);

    const damaged = join(out, 'damaged');
    cpSync(r.runDir, damaged, { recursive: true });
    rmSync(join(damaged, 'trace', receipt.trace!.segments[3]!.segment));
    const d = detsim(['diff', r.runDir, damaged]);
    expect(d.status).toBe(1); // a file that failed verification
    expect(d.stderr).toMatch(/^detsim: \[audit_trace_segment_missing\] .*segment 3 \(steps from 96, 24 steps\)/m);
    expect(d.stderr).not.toMatch(/\n\s+at /);

    checkReceiptFromReproFiles(r.runDir, out, golden.reproHash);
  }, 240_000);

  it('a segmented run resumed from a checkpoint reproduces the lif-pair golden, its earlier segments kept as they are', async () => {
    const golden = JSON.parse(readFileSync('fixtures/golden/lif-pair.json', 'utf8')) as {
      steps: number;
      reproHash: string;
      behaviourDigest: string;
    };
    const out = tmpDir('detsim-trace-resume-');
    const r = await runSession('examples/lif-pair.yaml', {
      outDir: out,
      steps: golden.steps,
      segmentSteps: 8,
      extension: new CheckpointRun({ every: 20, keep: 5 }),
      onWarning: () => undefined,
      logLevel: 'warn',
    });
    expect(r.reproHash).toBe(golden.reproHash);
    const before = readTraceIndex(r.runDir);
    const resumed = await resumeRun(r.runDir, { checkpointId: 'ckpt-e1-40', logLevel: 'warn' });
    expect([resumed.reproHash, resumed.behaviourDigest]).toEqual([golden.reproHash, golden.behaviourDigest]);
    // The segments before the boundary are the same files, untouched: nothing was resealed.
    const after = readTraceIndex(r.runDir);
    const kept = before.filter((s) => BigInt(s.firstStep) + BigInt(s.steps) <= 40n);
    expect(after.slice(0, kept.length)).toEqual(kept);
    expect(resumed.abandonedSteps).toBe(20);
    // Its receipt was hashed from repro files: the resumed epoch's steps were rebased when sealed.
    expect(readReproTexts(r.runDir)).not.toBeNull();
  }, 240_000);
});
