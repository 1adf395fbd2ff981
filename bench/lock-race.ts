// The run.lock race: N real processes try to take one directory's run.lock at the same moment,
// round after round; the one that gets it holds it until every other racer has tried, appending
// to a shared journal. Some rounds start free, some with a stale lock (a dead pid), some with an
// unreadable lock left long ago, some with a stale lock plus the claim of a taker that died. Every
// round must have exactly one holder, every other racer refused with perm_run_dir_locked, and the
// lock released. Usage: node --import tsx bench/lock-race.ts [--racers N] [--rounds R] [--dir D]
// (test/checkpoint/run-lock.test.ts runs a few rounds through runLockRace). Not a throughput benchmark.
import { spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDetsimError } from '../core/formats/errors.js';
import { acquireRunLock, RUN_LOCK_FILE } from '../coordinator/session/run-lock.js';
import { flagValue, reportLoop, startedAsScript } from './lib/loop-report.js';

const SELF = fileURLToPath(import.meta.url);
const JOURNAL = 'journal';

/** What run.lock looks like when a round starts (cycled through in this order). */
export const ROUND_KINDS = ['free', 'stale', 'unreadable-old', 'stale-with-dead-claim'] as const;
export type RoundKind = (typeof ROUND_KINDS)[number];

export interface LockRaceOptions {
  /** Where the racers and their journal live; the contested lock is `<dir>/run/run.lock`. */
  readonly dir: string;
  readonly racers: number;
  readonly rounds: number;
  readonly log?: (line: string) => void;
}

export interface LockRaceRound {
  readonly round: number;
  readonly kind: RoundKind;
  readonly winner: number;
  readonly tookOver: boolean;
}

// ---------------------------------------------------------------------------------------------
// Child: one racer

function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function journalLines(dir: string, round: number): string[][] {
  const path = join(dir, JOURNAL);
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split(' '))
    .filter((f) => Number(f[0]) === round);
}

/** One round: wait for `go-<round>`, try the lock, and (holding it) wait until all racers have an outcome. */
function race(dir: string, racer: number, round: number, racers: number): void {
  while (!existsSync(join(dir, `go-${round}`))) pause(1);
  const record = (event: string, detail = ''): void =>
    appendFileSync(join(dir, JOURNAL), `${round} ${event} ${racer} ${detail}\n`);
  let lock;
  try {
    lock = acquireRunLock(join(dir, 'run'), `racer ${racer}`);
  } catch (e) {
    record(isDetsimError(e) ? 'refused' : 'error', isDetsimError(e) ? e.reason : String(e).replace(/\s+/g, '_'));
    return;
  }
  record('enter', lock.tookOver ? `tookover:${lock.tookOver.pid}` : 'fresh');
  for (let waited = 0; waited < 10_000; waited++) {
    if (journalLines(dir, round).filter((f) => f[1] !== 'exit').length >= racers) break;
    pause(1);
  }
  lock.release();
  record('exit');
}

function child(dir: string, racer: number, racers: number, rounds: number): void {
  for (let round = 0; round < rounds; round++) race(dir, racer, round, racers);
}

// ---------------------------------------------------------------------------------------------
// Parent: set up each round, start it, check it

/** The pid of a process that has exited (and been reaped). */
function deadPid(): number {
  return spawnSync('true').pid!;
}

function writeStaleLock(runDir: string): void {
  writeFileSync(
    join(runDir, RUN_LOCK_FILE),
    `${JSON.stringify({ pid: deadPid(), hostname: hostname(), command: 'detsim run', token: 'stale' })}\n`,
  );
}

/** Lay out run.lock as the round kind says (the directory holds nothing else). */
function prepare(runDir: string, kind: RoundKind): void {
  rmSync(runDir, { recursive: true, force: true });
  mkdirSync(runDir);
  if (kind === 'free') return;
  const path = join(runDir, RUN_LOCK_FILE);
  if (kind === 'unreadable-old') {
    writeFileSync(path, '{"pid":12');
    const longAgo = new Date(statSync(path).mtimeMs - 3_600_000);
    utimesSync(path, longAgo, longAgo);
    return;
  }
  writeStaleLock(runDir);
  if (kind === 'stale-with-dead-claim') {
    const claim = join(runDir, `${RUN_LOCK_FILE}.takeover-${statSync(path).ino}-0`);
    writeFileSync(
      claim,
      `${JSON.stringify({ pid: deadPid(), hostname: hostname(), command: 'racer that died', token: 'dead-taker' })}\n`,
    );
  }
}

async function waitFor(what: string, done: () => boolean, budgetMs = 30_000): Promise<void> {
  for (let waited = 0; !done(); waited += 2) {
    if (waited > budgetMs) throw new Error(`lock race: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Exactly one holder, every other racer refused by name, the lock gone afterwards. Throws naming the round. */
function checkRound(dir: string, round: number, kind: RoundKind, racers: number): LockRaceRound {
  const lines = journalLines(dir, round);
  const where = `round ${round} (${kind})`;
  const errors = lines.filter((f) => f[1] === 'error');
  if (errors.length > 0) throw new Error(`${where}: a racer failed: ${errors.map((f) => f.join(' ')).join('; ')}`);
  const enters = lines.filter((f) => f[1] === 'enter');
  if (enters.length !== 1)
    throw new Error(
      `${where}: ${enters.length} racers held the lock (${enters.map((f) => `racer ${f[2]}`).join(', ')}), expected exactly 1`,
    );
  const refused = lines.filter((f) => f[1] === 'refused');
  const wrong = refused.filter((f) => f[3] !== 'perm_run_dir_locked');
  if (refused.length !== racers - 1 || wrong.length > 0)
    throw new Error(
      `${where}: expected ${racers - 1} refusals with perm_run_dir_locked, got ${refused.map((f) => f[3]).join(', ')}`,
    );
  const events = lines.map((f) => f[1]);
  if (events.indexOf('exit') < events.indexOf('enter'))
    throw new Error(`${where}: the holder recorded no exit after its enter`);
  const left = existsSync(join(dir, 'run', RUN_LOCK_FILE));
  if (left) throw new Error(`${where}: run.lock was left behind after release`);
  const tookOver = enters[0]![3]!.startsWith('tookover:');
  if (tookOver !== (kind !== 'free'))
    throw new Error(
      `${where}: the holder ${tookOver ? 'took over a lock in a free directory' : 'did not report the stale lock it replaced'}`,
    );
  return { round, kind, winner: Number(enters[0]![2]), tookOver };
}

/** A racer that died: its round can never complete. */
function failedEarly(c: { proc: ReturnType<typeof spawn> }): boolean {
  return c.proc.signalCode !== null || (c.proc.exitCode !== null && c.proc.exitCode !== 0);
}

function spawnRacer(dir: string, racer: number, racers: number, rounds: number) {
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', SELF, '--child', dir, String(racer), String(racers), String(rounds)],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const closed = new Promise<number | null>((res) => proc.on('close', (code) => res(code)));
  return { proc, closed, stderr: () => err };
}

/** Race `racers` processes for `rounds` rounds; throws at the first round that breaks mutual exclusion. */
export async function runLockRace(options: LockRaceOptions): Promise<LockRaceRound[]> {
  const { dir, racers, rounds } = options;
  const children = Array.from({ length: racers }, (_, i) => spawnRacer(dir, i, racers, rounds));
  const results: LockRaceRound[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      const kind = ROUND_KINDS[round % ROUND_KINDS.length]!;
      prepare(join(dir, 'run'), kind);
      writeFileSync(join(dir, `go-${round}`), '');
      await waitFor(
        `round ${round}`,
        () => journalLines(dir, round).length >= racers + 1 || children.some(failedEarly),
      );
      const dead = children.filter(failedEarly);
      if (dead.length > 0)
        throw new Error(`round ${round} (${kind}): a racer died: ${dead.map((c) => c.stderr().trim()).join('; ')}`);
      const result = checkRound(dir, round, kind, racers);
      options.log?.(
        `round ${round + 1}/${rounds} (${kind}): racer ${result.winner} held the lock, ${racers - 1} refused`,
      );
      results.push(result);
    }
    const codes = await Promise.all(children.map((c) => c.closed));
    const failed = children.filter((c, i) => codes[i] !== 0 || c.stderr().trim() !== '');
    if (failed.length > 0)
      throw new Error(`lock race: a racer failed: ${failed.map((c) => c.stderr().trim()).join('; ')}`);
    return results;
  } finally {
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
  }
}

const args = process.argv.slice(2);
if (startedAsScript(import.meta.url)) {
  if (args[0] === '--child') {
    child(args[1]!, Number(args[2]), Number(args[3]), Number(args[4]));
  } else {
    const dir = flagValue('--dir') ?? mkdtempSync(join(tmpdir(), 'detsim-lock-race-'));
    const racers = Number(flagValue('--racers') ?? 8);
    const rounds = Number(flagValue('--rounds') ?? 400);
    // runLockRace throws at the first round that breaks mutual exclusion.
    await reportLoop(
      'lock race',
      () => runLockRace({ dir, racers, rounds, log: (l) => process.stdout.write(`${l}\n`) }),
      {
        unit: 'rounds',
        failed: () => false,
        facts: () => [`${racers} racers`],
        passNote: 'exactly one holder every round',
      },
    );
  }
}
