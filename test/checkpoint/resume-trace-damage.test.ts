// `detsim resume` on a damaged segmented trace (#28 item 4): a kept segment flipped, truncated,
// deleted or swapped with another, an index entry's digest or running hashes edited, or index
// lines reordered, is refused by name before any worker starts, and the run directory is left
// byte for byte as it was (nothing is laundered into a new index). The undamaged copy resumes.
// Real CLI, real files: a run of 6 steps with checkpoints at 2, 4 and 6 has three segments, and a
// resume from ckpt-e1-4 keeps the first two. (A run whose ledger recorded no index digest gets its
// kept steps hashed again instead: test/trace/trace-store.test.ts.)
import { cpSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { snapshotDir } from '../dir-snapshot.js';
import { detsim } from './cli.js';
import { tmpDir } from './harness.js';

const T = 300_000;
let base: string;
let out: string;
let copies = 0;

/** A copy of the checkpointed run with its trace directory damaged by `damage`. */
function damaged(damage: (trace: string) => void): string {
  const dir = join(out, `copy-${++copies}`);
  cpSync(base, dir, { recursive: true });
  damage(join(dir, 'trace'));
  return dir;
}

/** The index's lines, edited by `edit` (parsed entries in, entries out), written back as canonical-form lines. */
function editIndex(trace: string, edit: (entries: Record<string, any>[]) => Record<string, any>[]): void {
  const path = join(trace, 'index.jsonl');
  const entries = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as Record<string, any>);
  // Keys stay in their original (sorted, canonical) order: JSON.stringify of a parsed canonical line.
  writeFileSync(
    path,
    edit(entries)
      .map((e) => `${JSON.stringify(e)}\n`)
      .join(''),
  );
}

/** Resume from ckpt-e1-4: refused with one line naming `reason`, nothing in the directory changed. */
function refused(dir: string, reason: string, detail: RegExp): void {
  const before = snapshotDir(dir);
  const r = detsim(['resume', dir, '--checkpoint', 'ckpt-e1-4']);
  expect(r.status, r.stderr).toBe(1);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  const line = r.stderr.trim().split('\n').at(-1)!;
  expect(line).toMatch(new RegExp(`^detsim: \\[${reason}\\] `));
  expect(line).toMatch(detail);
  expect(snapshotDir(dir)).toEqual(before);
  // No worker started: nothing was logged for this resume (run.log unchanged is in the snapshot).
  expect(r.stderr).not.toMatch(/worker-[0-9]+ (ready|started)/);
}

beforeAll(() => {
  out = tmpDir('detsim-resume-damage-');
  const r = detsim(['run', 'examples/lif-pair.yaml', '--steps', '6', '--checkpoint-every', '2', '--out', out]);
  expect(r.status, r.stderr).toBe(0);
  base = join(out, 'lif-pair-1');
  const segments = readFileSync(join(base, 'trace', 'index.jsonl'), 'utf8')
    .trim()
    .split('\n');
  expect(segments.length).toBeGreaterThanOrEqual(3);
}, T);

describe('resume refuses a damaged kept trace before any worker starts', () => {
  it(
    'a kept segment flipped, truncated, deleted, or swapped with the other kept one',
    () => {
      refused(
        damaged((t) => {
          const p = join(t, '000000.jsonl.gz');
          const b = readFileSync(p);
          b[b.length >> 1] = b[b.length >> 1]! ^ 0x01;
          writeFileSync(p, b);
        }),
        'audit_trace_segment_tampered',
        /000000\.jsonl\.gz: segment 0's bytes differ/,
      );
      refused(
        damaged((t) => truncateSync(join(t, '000001.jsonl.gz'), 10)),
        'audit_trace_segment_tampered',
        /000001\.jsonl\.gz: segment 1's bytes differ/,
      );
      refused(
        damaged((t) => rmSync(join(t, '000000.jsonl.gz'))),
        'audit_trace_segment_missing',
        /000000\.jsonl\.gz: segment 0 .* is missing/,
      );
      refused(
        damaged((t) => {
          renameSync(join(t, '000000.jsonl.gz'), join(t, 'x'));
          renameSync(join(t, '000001.jsonl.gz'), join(t, '000000.jsonl.gz'));
          renameSync(join(t, 'x'), join(t, '000001.jsonl.gz'));
        }),
        'audit_trace_segment_reordered',
        /000000\.jsonl\.gz: holds the bytes index\.jsonl binds to segment 1/,
      );
    },
    T,
  );

  it(
    "an index entry's digest or running hashes edited, or index lines reordered",
    () => {
      refused(
        damaged((t) => editIndex(t, (es) => es.map((e, i) => (i === 0 ? { ...e, sha256: 'a'.repeat(64) } : e)))),
        'audit_trace_segment_tampered',
        /000000\.jsonl\.gz: segment 0's bytes differ from the SHA-256 index\.jsonl binds/,
      );
      refused(
        damaged((t) =>
          editIndex(t, (es) =>
            es.map((e, i) => (i === 0 ? { ...e, after: { ...e.after, chain: 'b'.repeat(64) } } : e)),
          ),
        ),
        'audit_trace_segment_tampered',
        /index\.jsonl: its 2 entries before step 4 differ from those recorded in ledger\.jsonl when ckpt-e1-4 was captured/,
      );
      refused(
        damaged((t) => editIndex(t, ([a, b, ...rest]) => [b!, a!, ...rest])),
        'audit_trace_segment_reordered',
        /index\.jsonl: entry 0 \(000001\.jsonl\.gz, from step 2\) is out of place/,
      );
    },
    T,
  );

  it(
    'the undamaged copy resumes from the same checkpoint',
    () => {
      const dir = damaged(() => undefined);
      const r = detsim(['resume', dir, '--checkpoint', 'ckpt-e1-4']);
      expect(r.status, r.stderr).toBe(0);
    },
    T,
  );
});
