// probe: capture -> durable vs raw write+fsync, per round, with each worker call timed.
import { mkdtempSync, rmSync } from 'node:fs';
import { open, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { captureGroup } from '../coordinator/checkpoint/capture.js';
import type { CheckpointGroup } from '../coordinator/checkpoint/group.js';
import { group, lifPlan } from './suites/checkpoint.js';
function recordCalls(g: CheckpointGroup, since: () => number, lines: string[]): void {
  const call = g.call.bind(g);
  g.call = (async (...args: Parameters<typeof call>) => {
    const what = `${args[1]} ${args[2]}`;
    const t = since();
    try { return await call(...args); } finally { lines.push(`${t.toFixed(0).padStart(5)}..${since().toFixed(0).padStart(5)} ${what}`); }
  }) as typeof g.call;
}
async function rawWriteFsync(total: number, path: string): Promise<number> {
  const buf = Buffer.alloc(8 * 1024 * 1024, 0x5a);
  const t = performance.now();
  const fh = await open(path, 'w');
  for (let at = 0; at < total; at += buf.byteLength) await fh.write(buf, 0, Math.min(buf.byteLength, total - at), at);
  await fh.sync();
  await fh.close();
  const s = performance.now() - t;
  await unlink(path);
  return s;
}
const big = Number(process.argv[2] ?? 22_400_000);
const rounds = Number(process.argv[3] ?? 3);
const runDir = mkdtempSync(join('/work/probe', 'c2d-'));
const s = await group(lifPlan(big, 16), runDir);
const stateBytes = 12 * (big + 16);
try {
  await s.g.step();
  await rawWriteFsync(stateBytes, join(runDir, 'raw.bin'));
  for (let r = 0; r < rounds; r++) {
    await rawWriteFsync(stateBytes, join(runDir, 'raw.bin'));
    const raw = await rawWriteFsync(stateBytes, join(runDir, 'raw.bin'));
    await rawWriteFsync(stateBytes, join(runDir, 'raw.bin'));
    const lines: string[] = [];
    const t0 = performance.now();
    recordCalls(s.g, () => performance.now() - t0, lines);
    const rec = await captureGroup(s.g, { checkpointId: `ckpt-e1-${s.g.boundary}` });
    const tc = performance.now() - t0;
    const out = await rec.ticket.wait();
    const td = performance.now() - t0;
    console.log(lines.filter((l) => /Capture|WritePayload/.test(l)).join('\n'));
    console.log(`round ${r}: raw ${raw.toFixed(0)} ms; capture ${tc.toFixed(0)} ms, durable ${td.toFixed(0)} ms (${out.kind}); ratio ${(raw / td).toFixed(2)}`);
    await s.g.step();
  }
} finally { await s.close(); rmSync(runDir, { recursive: true, force: true }); }
