// The trace's sealing thread (coordinator/trace/trace-seal-thread.ts): a segment large enough to be sealed
// on the thread gives exactly what sealing it here gives (gzip bytes, chain, digest state), and so does a
// segment fed to the thread piece by piece (ThreadSeal), as the segment writer feeds it while steps come.
// The steps are a real run's (walkers on forage, in-process workers), so the repro texts are real ones.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveConfig } from '../../coordinator/config.js';
import { runSession } from '../../coordinator/session/run.js';
import {
  genesisHashes,
  sealSegment,
  sealSegmentOffLoop,
  THREAD_SEAL_MIN_CHARS,
  ThreadSeal,
  type SealInput,
} from '../../coordinator/trace/trace-seal-thread.js';
import {
  readTraceIndex,
  readTraceLinesSync,
  SEAL_PIECE_CHARS,
  SEAL_PIECE_STEPS,
  SegmentedTraceWriter,
} from '../../coordinator/trace/trace-store.js';
import { canonicalize } from '../../core/formats/canonical-json.js';

describe('sealSegmentOffLoop', () => {
  it('a segment over the thread threshold: the same gzip bytes and running hashes as sealing here', async () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => `{"step":"${i}","pad":"${'x'.repeat(40)}"}\n`).join('');
    const behaviour = Array.from({ length: 20_000 }, (_, i) => `{"b":${i}}\n`).join('');
    const input = { text: lines, behaviour, from: genesisHashes() };
    expect(lines.length + behaviour.length).toBeGreaterThanOrEqual(THREAD_SEAL_MIN_CHARS);
    const there = await sealSegmentOffLoop(input);
    const here = sealSegment(input);
    expect(Buffer.from(there.gz).equals(Buffer.from(here.gz))).toBe(true);
    expect(there.to).toEqual(here.to);
  });
});

describe('a segment sealed piece by piece', () => {
  const work = mkdtempSync(join(tmpdir(), 'detsim-seal-pieces-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));
  /** 100 steps of a real run: each step's trace line, behaviour text and observations text. */
  let steps: { line: string; behaviour: string; observations: string }[] = [];
  beforeAll(async () => {
    const plan = resolveConfig({
      sessionId: 'pieces',
      masterSeed: '7',
      steps: 100,
      environment: { id: 'world', model: 'forage', params: { width: 16, height: 16, food: 8 } },
      agents: { count: 4, prefix: 'walker-', model: 'walker' },
      workers: { transport: 'inline' },
    });
    const run = await runSession(plan, { outDir: work });
    steps = [...readTraceLinesSync(run.runDir)].map((line, k) => {
      const behaviour = canonicalize((JSON.parse(line) as { behaviour: never }).behaviour);
      return { line, behaviour, observations: canonicalize([{ step: k }]) };
    });
  }, 120_000);

  const joined = (from: number, to: number) => ({
    text: steps
      .slice(from, to)
      .map((s) => `${s.line}\n`)
      .join(''),
    behaviour: steps
      .slice(from, to)
      .map((s) => `${s.behaviour}\n`)
      .join(''),
    observations: steps
      .slice(from, to)
      .map((s) => `${s.observations}\n`)
      .join(''),
  });

  it("fed in pieces of 1, 32 and 7 steps then finished: the one-shot seal's lines, repro file, observations and digest state", async () => {
    expect(steps).toHaveLength(100);
    const whole: SealInput = { ...joined(0, 100), from: genesisHashes(), repro: true };
    const one = sealSegment(whole);
    const seal = new ThreadSeal();
    for (const [a, b] of [
      [0, 1],
      [1, 33],
      [33, 40],
    ])
      await seal.feed({ ...joined(a!, b!), repro: true });
    const pieces = await seal.finish({ ...joined(40, 100), from: genesisHashes(), repro: true }, 100);
    expect(Buffer.from(pieces.gz).equals(Buffer.from(one.gz))).toBe(true);
    expect(gunzipSync(pieces.gz).toString('utf8')).toBe(whole.text);
    expect(pieces.to).toEqual(one.to);
    expect(Buffer.from(pieces.repro!.gz).equals(Buffer.from(one.repro!.gz))).toBe(true);
    expect({ base: pieces.repro!.base, unknown: pieces.repro!.unknownFields }).toEqual({
      base: one.repro!.base,
      unknown: one.repro!.unknownFields,
    });
    expect(Buffer.from(pieces.observationsGz!).equals(Buffer.from(one.observationsGz!))).toBe(true);
  });

  it('a finish whose pieces do not add up to the segment fails, naming both counts (a lost piece is never sealed)', async () => {
    const seal = new ThreadSeal();
    await seal.feed({ ...joined(0, 32), repro: true });
    await expect(seal.finish({ ...joined(32, 50), from: genesisHashes(), repro: true }, 51)).rejects.toThrow(
      "the sealing thread got 50 of the segment's 51 steps",
    );
  });

  it(`the segment writer feeds pieces (at most ${SEAL_PIECE_STEPS} steps): a sync after 100 writes the one-shot segment and repro file`, async () => {
    const dir = join(work, 'writer');
    const w = new SegmentedTraceWriter(dir);
    for (const s of steps) await w.appendLine(s.line, s.behaviour);
    await w.sync();
    await w.close();
    const [entry, ...rest] = readTraceIndex(dir);
    expect(rest).toEqual([]);
    const one = sealSegment({ ...joined(0, 100), from: genesisHashes(), repro: true });
    const onDisk = readFileSync(join(dir, 'trace', entry!.segment));
    expect(onDisk.equals(Buffer.from(one.gz))).toBe(true);
    expect(onDisk.equals(gzipSync(Buffer.from(joined(0, 100).text, 'utf8')))).toBe(true);
    expect(readFileSync(join(dir, 'trace', entry!.repro!.file)).equals(Buffer.from(one.repro!.gz))).toBe(true);
    expect(entry!.after).toEqual(one.to);
    expect(entry!.steps).toBe(100);
  });

  it(`a piece also goes once its texts reach ${SEAL_PIECE_CHARS} characters: the same segment`, async () => {
    const dir = join(work, 'by-chars');
    const feed = vi.spyOn(ThreadSeal.prototype, 'feed');
    try {
      const w = new SegmentedTraceWriter(dir);
      for (const s of steps) await w.appendLine(s.line, s.behaviour);
      await w.sync();
      await w.close();
      const pieces = feed.mock.calls.map(([p]) => p);
      // These steps are ~4 k characters each: the character budget cuts before the step count.
      expect(pieces.length).toBeGreaterThan(Math.floor(100 / SEAL_PIECE_STEPS));
      for (const p of pieces) {
        const lines = p.text.split('\n').length - 1;
        const chars = p.text.length + p.behaviour.length;
        const last = steps.find((s) => p.text.endsWith(`${s.line}\n`))!;
        expect(lines).toBeLessThan(SEAL_PIECE_STEPS);
        expect(chars).toBeGreaterThanOrEqual(SEAL_PIECE_CHARS);
        expect(chars - last.line.length - last.behaviour.length - 2).toBeLessThan(SEAL_PIECE_CHARS);
      }
    } finally {
      feed.mockRestore();
    }
    const [entry] = readTraceIndex(dir);
    const one = sealSegment({ ...joined(0, 100), from: genesisHashes(), repro: true });
    expect(readFileSync(join(dir, 'trace', entry!.segment)).equals(Buffer.from(one.gz))).toBe(true);
    expect(readFileSync(join(dir, 'trace', entry!.repro!.file)).equals(Buffer.from(one.repro!.gz))).toBe(true);
    expect(entry!.after).toEqual(one.to);
  });
});
