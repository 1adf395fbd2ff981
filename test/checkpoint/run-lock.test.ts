// run.lock (coordinator/session/run-lock.ts): one writer per run directory. A live holder is refused with
// perm_run_dir_locked naming it; a holder that is gone (SIGKILL) or a torn lock file is taken over;
// release never removes another process's lock; `detsim resume` and `detsim store gc` refuse a
// run directory in use without changing it, and a finished `detsim run` leaves no lock behind.
// Races: real processes compete for one lock (bench/lock-race.ts), and two real `detsim resume`
// processes under an adversarial schedule (children/lock-barrier.ts); both fail on check-then-unlink.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runLockRace } from '../../bench/lock-race.js';
import { acquireRunLock, RUN_LOCK_FILE } from '../../coordinator/session/run-lock.js';
import { refusal as refused } from '../refusal.js';
import { detsim, detsimAsync } from './cli.js';
import { tmpDir } from './harness.js';
import { traceFingerprint } from '../trace-read.js';

const children: ReturnType<typeof spawn>[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

/** A live process that is not us (holds a lock in these tests). */
function liveProcess(): number {
  const c = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)'], { stdio: 'ignore' });
  children.push(c);
  return c.pid!;
}

/** The pid of a process that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' })
    .stdout as unknown as number;
}

/** Make a file look `seconds` old. */
function age(path: string, seconds: number): void {
  const then = new Date(statSync(path).mtimeMs - seconds * 1000);
  utimesSync(path, then, then);
}

function writeLock(dir: string, pid: number, host = hostname()): void {
  writeFileSync(
    join(dir, RUN_LOCK_FILE),
    `${JSON.stringify({ pid: Number(pid), hostname: host, command: 'detsim run' })}\n`,
  );
}

describe('run.lock', () => {
  it('is exclusive while held, names its holder, and is free again after release', () => {
    const dir = tmpDir('detsim-lock-');
    const lock = acquireRunLock(dir, 'detsim resume');
    expect(JSON.parse(readFileSync(lock.path, 'utf8'))).toMatchObject({
      pid: process.pid,
      hostname: hostname(),
      command: 'detsim resume',
    });
    const e = refused(() => acquireRunLock(dir, 'detsim store gc'));
    expect(e.reason).toBe('perm_run_dir_locked');
    expect(e.message).toContain(`in use by detsim resume (pid ${process.pid} on ${hostname()})`);
    lock.release();
    lock.release();
    expect(existsSync(lock.path)).toBe(false);
    acquireRunLock(dir, 'detsim run').release();
  });

  it('refuses a live holder, one on another host and a young unreadable file; takes over a dead holder and an old torn file', () => {
    const dir = tmpDir('detsim-lock-');
    const pid = liveProcess();
    writeLock(dir, pid);
    expect(refused(() => acquireRunLock(dir, 'detsim resume')).message).toContain(`pid ${pid}`);
    writeLock(dir, 1, 'another-host.example');
    expect(refused(() => acquireRunLock(dir, 'detsim resume')).message).toContain('on another-host.example');

    const gone = Number(deadPid());
    writeLock(dir, gone);
    const lock = acquireRunLock(dir, 'detsim resume');
    expect(lock.tookOver).toEqual({ pid: gone, hostname: hostname(), command: 'detsim run' });
    lock.release();
    // Unreadable: only an older detsim's crash leaves one (a lock now appears whole), so it is held while young.
    writeFileSync(join(dir, RUN_LOCK_FILE), '{"pid":12');
    expect(refused(() => acquireRunLock(dir, 'detsim resume')).message).toContain(
      'is unreadable and less than 10 s old',
    );
    age(join(dir, RUN_LOCK_FILE), 3600);
    const torn = acquireRunLock(dir, 'detsim resume');
    expect(torn.tookOver).toMatchObject({ command: 'unreadable lock' });
    torn.release();
  });

  it('skips the claim of a taker that died mid-takeover and sweeps such litter once it holds the lock', () => {
    const dir = tmpDir('detsim-lock-');
    const gone = Number(deadPid());
    writeLock(dir, gone);
    const claim = join(dir, `${RUN_LOCK_FILE}.takeover-${statSync(join(dir, RUN_LOCK_FILE)).ino}-0`);
    writeFileSync(
      claim,
      `${JSON.stringify({ pid: Number(deadPid()), hostname: hostname(), command: 'detsim resume', token: 't' })}\n`,
    );
    writeFileSync(
      join(dir, `${RUN_LOCK_FILE}.draft-of-a-dead-process.tmp`),
      `${JSON.stringify({ pid: gone, hostname: hostname(), command: 'detsim run', token: 'd' })}\n`,
    );
    const lock = acquireRunLock(dir, 'detsim resume');
    expect(lock.tookOver).toMatchObject({ pid: gone });
    expect(readdirSync(dir)).toEqual([RUN_LOCK_FILE]);
    lock.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('release leaves a lock that another process took in the meantime', () => {
    const dir = tmpDir('detsim-lock-');
    const lock = acquireRunLock(dir, 'detsim run');
    const other = liveProcess();
    writeLock(dir, other);
    lock.release();
    expect(JSON.parse(readFileSync(join(dir, RUN_LOCK_FILE), 'utf8')).pid).toBe(other);
  });

  // Issue 11 item 4: check-then-unlink let several processes "take over" one stale lock, and a
  // reader could judge a lock being written as torn and delete it. Real processes, many rounds.
  it('6 processes racing for one directory, round after round (free, stale, old unreadable, stale with a dead claim): exactly one holder each round', async () => {
    const rounds = await runLockRace({ dir: tmpDir('detsim-lockrace-'), racers: 6, rounds: 48 });
    expect(rounds.map((r) => r.tookOver)).toEqual(rounds.map((r) => r.kind !== 'free'));
  }, 120_000);

  // The preload releases both resumes together and then forces the interleaving in which a
  // check-then-unlink takeover deletes the other's fresh lock (both resumed, the ledger chain broke).
  it('CLI: two resumes released together on a run with a stale lock, under an unlucky schedule: one resumes, the other is refused, the ledger verifies', async () => {
    const out = tmpDir('detsim-lockresume-');
    // Worker processes: the preload (a .ts file) is the coordinator's, which a worker thread would inherit.
    const r = detsim([
      'run',
      'examples/lif-pair.yaml',
      '--steps',
      '2',
      '--checkpoint-every',
      '1',
      '--transport',
      'unix',
      '--out',
      out,
    ]);
    expect(r.status, r.stderr).toBe(0);
    const runDir = join(out, 'lif-pair-1');
    for (const steps of [3, 4]) {
      writeLock(runDir, Number(deadPid()));
      const barrier = tmpDir('detsim-lockbarrier-');
      const env = { DETSIM_TEST_LOCK_BARRIER: barrier, DETSIM_TEST_LOCK_RACERS: '2' };
      const racing = [0, 1].map(() =>
        detsimAsync(['resume', runDir, '--steps', String(steps)], {
          preload: './test/checkpoint/children/lock-barrier.ts',
          env,
        }),
      );
      while (readdirSync(barrier).length < racing.length) await new Promise((res) => setTimeout(res, 5));
      writeFileSync(join(barrier, 'go'), '');
      const results = await Promise.all(racing);
      const winners = results.filter((x) => x.status === 0);
      const losers = results.filter((x) => x.status !== 0);
      expect(winners.length, results.map((x) => x.stderr).join('\n')).toBe(1);
      for (const loser of losers) {
        expect(loser.status).toBe(2);
        expect(loser.stderr.trim()).toMatch(/^detsim: \[perm_run_dir_locked\] /);
      }
      expect(winners[0]!.stderr).toContain('run.lock left by detsim run');
      expect(existsSync(join(runDir, RUN_LOCK_FILE))).toBe(false);
      const ledger = detsim(['ledger', 'verify', runDir]);
      expect(ledger.status, ledger.stderr).toBe(0);
    }
  }, 240_000);

  it('CLI: a finished run leaves no lock; resume and store gc refuse a run directory in use (exit 2) and change nothing', () => {
    const out = tmpDir('detsim-lockcli-');
    const r = detsim(['run', 'examples/lif-pair.yaml', '--steps', '2', '--checkpoint-every', '1', '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    const runDir = join(out, 'lif-pair-1');
    expect(existsSync(join(runDir, RUN_LOCK_FILE))).toBe(false);
    const pid = liveProcess();
    writeLock(runDir, pid);
    const trace = traceFingerprint(runDir);
    const store = readFileSync(join(runDir, 'store', 'manifest.json'), 'utf8');
    for (const args of [
      ['resume', runDir, '--steps', '3'],
      ['store', 'gc', join(runDir, 'store')],
    ]) {
      const x = detsim(args);
      expect(x.status, x.stderr).toBe(2);
      expect(x.stderr.trim()).toMatch(
        new RegExp(`^detsim: \\[perm_run_dir_locked\\] .*in use by detsim run \\(pid ${pid} `),
      );
    }
    expect(traceFingerprint(runDir)).toBe(trace);
    expect(readFileSync(join(runDir, 'store', 'manifest.json'), 'utf8')).toBe(store);
    // Once the holder is gone the same resume goes ahead (the stale lock is taken over) and releases it.
    // (Not awaited: the killed holder stays an unreaped zombie, which must count as gone too.)
    children.splice(0).forEach((c) => c.kill('SIGKILL'));
    spawnSync('sleep', ['0.2']);
    const ok = detsim(['resume', runDir, '--steps', '3']);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stderr).toContain(`run.lock left by detsim run (pid ${pid}), which is gone: taken over`);
    expect(existsSync(join(runDir, RUN_LOCK_FILE))).toBe(false);
  }, 240_000);
});
