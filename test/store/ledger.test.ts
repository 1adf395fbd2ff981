// The run ledger: hash chain from a fixed genesis, fsynced appends in call order, tamper detection
// (changed, removed, reordered lines, at the start, middle and end), torn-tail recovery, and the
// head that follows each line (an append waits for its line only).
import { createHash } from 'node:crypto';
import { appendFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DetsimError } from '../../core/formats/errors.js';
import {
  LEDGER_FILE,
  LEDGER_GENESIS,
  LEDGER_HEAD_FILE,
  Ledger,
  verifyLedger,
  verifyLedgerBytes,
} from '../../coordinator/store/ledger.js';
import { DurableFs } from '../../coordinator/store/durable-fs.js';
import { removeDir, tempDir } from './helpers.js';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('ledger');
});
afterEach(async () => {
  await removeDir(dir);
});

const sha = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

async function writeRun(): Promise<void> {
  const ledger = await Ledger.open(dir);
  // Issued without awaiting each: appends must keep call order.
  const all = [
    ledger.append({ event: 'run', sessionId: 'demo', epoch: 'e1', detail: { steps: '10' } }),
    ledger.append({ event: 'captured', checkpointId: 'ckpt-2', boundary: '2', epoch: 'e1' }),
    ledger.append({ event: 'queued', checkpointId: 'ckpt-2', boundary: '2', epoch: 'e1' }),
    ledger.append({
      event: 'committed',
      checkpointId: 'ckpt-2',
      boundary: '2',
      epoch: 'e1',
      detail: { generation: 'ckpt-2.flysess' },
    }),
    ledger.append({ event: 'restored', checkpointId: 'ckpt-2', boundary: '2', epoch: 'e2' }),
  ];
  await Promise.all(all);
  await ledger.flush();
}

async function lines(): Promise<string[]> {
  return (await readFile(join(dir, LEDGER_FILE), 'utf8')).split('\n').slice(0, -1);
}
async function setLines(ls: string[]): Promise<void> {
  await writeFile(join(dir, LEDGER_FILE), ls.map((l) => `${l}\n`).join(''));
}

describe('ledger.jsonl', () => {
  it('chains every line to the SHA-256 of the line before; the first links to the fixed genesis', async () => {
    await writeRun();
    const ls = await lines();
    expect(LEDGER_GENESIS).toBe(sha('detsim/ledger-v1/genesis\n'));
    expect(ls.map((l) => JSON.parse(l).event)).toEqual(['run', 'captured', 'queued', 'committed', 'restored']);
    expect(JSON.parse(ls[0]!)).toEqual({
      event: 'run',
      sessionId: 'demo',
      epoch: 'e1',
      detail: { steps: '10' },
      seq: '1',
      prev: LEDGER_GENESIS,
    });
    for (let i = 1; i < ls.length; i++) {
      expect(JSON.parse(ls[i]!).prev).toBe(sha(ls[i - 1]!));
      expect(JSON.parse(ls[i]!).seq).toBe(String(i + 1));
    }
    expect(await verifyLedger(dir)).toMatchObject({ ok: true, lines: 5, beyondHead: 0, tornBytes: 0 });
  });

  it('re-opening continues the chain', async () => {
    await writeRun();
    const again = await Ledger.open(dir);
    expect(again.length).toBe(5);
    await again.append({
      event: 'failed',
      checkpointId: 'ckpt-4',
      boundary: '4',
      epoch: 'e2',
      detail: { reason: 'generation_write_failed' },
    });
    const ls = await lines();
    expect(JSON.parse(ls[5]!).prev).toBe(sha(ls[4]!));
    expect((await verifyLedger(dir)).ok).toBe(true);
  });

  const tampers: { name: string; edit: (ls: string[]) => string[]; line: number; reason: string }[] = [
    {
      name: 'a changed first line',
      edit: (ls) => [ls[0]!.replace('"steps":"10"', '"steps":"11"'), ...ls.slice(1)],
      line: 1,
      reason: 'audit_ledger_chain',
    },
    {
      name: 'a changed middle line',
      edit: (ls) => ls.map((l, i) => (i === 2 ? l.replace('"ckpt-2"', '"ckpt-3"') : l)),
      line: 3,
      reason: 'audit_ledger_chain',
    },
    {
      name: 'a changed last line',
      edit: (ls) => ls.map((l, i) => (i === 4 ? l.replace('"e2"', '"e9"') : l)),
      line: 5,
      reason: 'audit_ledger_chain',
    },
    {
      name: 'a removed middle line',
      edit: (ls) => ls.filter((_, i) => i !== 2),
      line: 3,
      reason: 'audit_ledger_chain',
    },
    { name: 'a removed first line', edit: (ls) => ls.slice(1), line: 1, reason: 'audit_ledger_chain' },
    { name: 'a removed last line', edit: (ls) => ls.slice(0, -1), line: 5, reason: 'audit_ledger_truncated' },
    {
      name: 'two reordered lines',
      edit: (ls) => [ls[0]!, ls[2]!, ls[1]!, ls[3]!, ls[4]!],
      line: 2,
      reason: 'audit_ledger_chain',
    },
    {
      name: 'a reordered line with its seq rewritten',
      edit: (ls) => [
        ls[0]!,
        ls[2]!.replace('"seq":"3"', '"seq":"2"'),
        ls[1]!.replace('"seq":"2"', '"seq":"3"'),
        ls[3]!,
        ls[4]!,
      ],
      line: 2,
      reason: 'audit_ledger_chain',
    },
  ];
  for (const t of tampers) {
    it(`detects ${t.name}, naming line ${t.line}`, async () => {
      await writeRun();
      await setLines(t.edit(await lines()));
      const result = await verifyLedger(dir);
      expect(result.ok).toBe(false);
      expect(result.problem).toMatchObject({ line: t.line, reason: t.reason });
      expect(result.problem!.message).toContain(`line ${t.line}`);
      // A tampered ledger is never appended to.
      await expect(Ledger.open(dir)).rejects.toBeInstanceOf(DetsimError);
    });
  }

  it('a line torn by a crash during its append is cut off on re-open and recorded', async () => {
    await writeRun();
    await appendFile(join(dir, LEDGER_FILE), '{"boundary":"4","checkpointId":"ck');
    expect(await verifyLedger(dir)).toMatchObject({ ok: true, lines: 5, tornBytes: 34 });
    const ledger = await Ledger.open(dir);
    expect(ledger.length).toBe(6);
    const ls = await lines();
    expect(JSON.parse(ls[5]!)).toMatchObject({ event: 'recovered', detail: { tornBytes: '34' }, prev: sha(ls[4]!) });
    expect(await verifyLedger(dir)).toMatchObject({ ok: true, lines: 6, tornBytes: 0 });
  });

  it('refuses an unknown event kind and a bad checkpoint id, writing nothing', async () => {
    const ledger = await Ledger.open(dir);
    await expect(ledger.append({ event: 'deleted' as 'run' })).rejects.toThrow(/not one of/);
    await expect(ledger.append({ event: 'captured', checkpointId: 'Bad Id' })).rejects.toThrow(/checkpointId/);
    await expect(readFile(join(dir, LEDGER_FILE))).rejects.toThrow(/ENOENT/);
  });
});

describe('ledger tamper detection (property)', () => {
  it('any single deleted, swapped or byte-modified line is detected and the first affected line named', async () => {
    const ledger = await Ledger.open(dir);
    for (let n = 1; n <= 12; n++)
      await ledger.append({
        event: n % 2 ? 'queued' : 'committed',
        checkpointId: `ckpt-${n}`,
        boundary: String(n),
        epoch: 'e1',
      });
    await ledger.flush();
    const text = await readFile(join(dir, LEDGER_FILE), 'utf8');
    const head = await readFile(join(dir, LEDGER_HEAD_FILE));
    const original = text.split('\n').slice(0, -1);
    const edit = fc.oneof(
      fc.record({ op: fc.constant('delete' as const), i: fc.nat({ max: 11 }) }),
      fc.record({ op: fc.constant('swap' as const), i: fc.nat({ max: 10 }), d: fc.integer({ min: 1, max: 11 }) }),
      fc.record({
        op: fc.constant('modify' as const),
        i: fc.nat({ max: 11 }),
        at: fc.nat(),
        ch: fc.constantFrom('0', '9', 'a', 'f', 'x', '"', '{', ' '),
      }),
    );
    fc.assert(
      fc.property(edit, (e) => {
        const ls = [...original];
        let line: number;
        if (e.op === 'delete') {
          ls.splice(e.i, 1);
          line = e.i + 1;
        } else if (e.op === 'swap') {
          const j = Math.min(11, e.i + e.d);
          [ls[e.i], ls[j]] = [ls[j]!, ls[e.i]!];
          line = e.i + 1;
        } else {
          const l = ls[e.i]!;
          const at = e.at % l.length;
          fc.pre(l[at] !== e.ch);
          ls[e.i] = l.slice(0, at) + e.ch + l.slice(at + 1);
          line = e.i + 1;
        }
        const result = verifyLedgerBytes(Buffer.from(ls.map((l) => `${l}\n`).join('')), head);
        expect(result.ok).toBe(false);
        expect(result.problem!.line).toBe(line);
      }),
      { numRuns: 300 },
    );
  });

  it('a head edited to an earlier line count is named as the head, not as an unchanged line', async () => {
    const ledger = await Ledger.open(dir);
    for (const n of [1, 2, 3])
      await ledger.append({ event: 'committed', checkpointId: `ckpt-${n}`, boundary: String(n), epoch: 'e1' });
    await ledger.flush();
    const ledgerBytes = await readFile(join(dir, LEDGER_FILE));
    const head = (await readFile(join(dir, LEDGER_HEAD_FILE), 'utf8')).replace('"lines":"3"', '"lines":"2"');
    const r = verifyLedgerBytes(ledgerBytes, Buffer.from(head));
    expect(r.ok).toBe(false);
    expect(r.problem!.message).toMatch(
      /^ledger\.head\.json was changed: it records 2 lines ending in [0-9a-f]{16}…, and line 2, which line 3 links to as it is, has SHA-256 [0-9a-f]{16}…$/,
    );
    // The last line changed in place (the head names it, nothing links to it): still that line.
    const lines = ledgerBytes.toString('utf8').split('\n');
    lines[2] = lines[2]!.replace('"boundary":"3"', '"boundary":"4"');
    const last = verifyLedgerBytes(Buffer.from(lines.join('\n')), await readFile(join(dir, LEDGER_HEAD_FILE)));
    expect(last.problem!.message).toBe('line 3 was changed: its SHA-256 differs from the one ledger.head.json records');
  });
});

describe('the head follows the line', () => {
  it('an append resolves once its line is durable; flush waits for the head, which then names it', async () => {
    const ledger = await Ledger.open(dir);
    await ledger.append({ event: 'run', sessionId: 'demo', epoch: 'e1' });
    const line = await ledger.append({ event: 'restored', checkpointId: 'ckpt-2', boundary: '2', epoch: 'e2' });
    expect(JSON.parse((await lines())[1]!)).toEqual(line);
    await ledger.flush();
    const head = JSON.parse(await readFile(join(dir, LEDGER_HEAD_FILE), 'utf8'));
    expect(head).toEqual({ lastHash: sha((await lines())[1]!), ledgerVersion: 1, lines: '2' });
    expect(await verifyLedger(dir)).toMatchObject({ ok: true, lines: 2, beyondHead: 0 });
  });

  it('a failed head write leaves the line durable, and the next append and flush fail naming it', async () => {
    class HeadFails extends DurableFs {
      override publish(...args: Parameters<DurableFs['publish']>): ReturnType<DurableFs['publish']> {
        if (args[2] === LEDGER_HEAD_FILE) return Promise.reject(new Error('ENOSPC: no space left on device'));
        return super.publish(...args);
      }
    }
    const ledger = await Ledger.open(dir, { fs: new HeadFails() });
    await ledger.append({ event: 'run', sessionId: 'demo', epoch: 'e1' });
    await expect(ledger.flush()).rejects.toThrow(/unusable after a failed append: ENOSPC/);
    await expect(ledger.append({ event: 'queued', checkpointId: 'ckpt-2' })).rejects.toThrow(/ENOSPC/);
    expect(await lines()).toHaveLength(1);
    expect(await verifyLedger(dir)).toMatchObject({ ok: true, lines: 1, beyondHead: 1, hasHead: false });
  });
});
