// Ctrl-C through the built CLI with real workers: a real SIGINT to the process group of `detsim run`
// (what a terminal's Ctrl-C sends) once a checkpoint was committed ends the run with ONE line naming
// the step and the `detsim resume` that continues it from the last checkpoint, exit 130, every worker
// stopped and the run directory whole; a resume interrupted the same way says the same, and the run
// resumed to its end is the uninterrupted run: the same ReproHash, behaviour digest and rewards.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { CLI_MAIN, detsimCli } from '../cli-refusal.js';
import { isAlive, tmpOut } from '../coordinator/helpers.js';

const EXAMPLE = 'examples/forage-walkers.yaml';
const STEPS = '1500';

/** Every worker pid the run directory's run.log records, over all its sessions. */
function workerPids(dir: string): number[] {
  const pids: number[] = [];
  for (const line of readFileSync(join(dir, 'run.log'), 'utf8').split('\n'))
    if (line.includes('"workers spawned"'))
      pids.push(...(JSON.parse(line) as { workers: { pid: number }[] }).workers.map((w) => w.pid));
  return pids;
}

/**
 * Start `detsim <args>` in a process group of its own, wait until stderr shows a checkpoint of
 * `epoch` committed, send SIGINT to the whole group, and return the exit code and stderr.
 */
async function interruptAfterCheckpoint(
  args: string[],
  epoch: string,
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CLI_MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stderr = '';
  const committed = new RegExp(`^checkpoint ckpt-${epoch}-[0-9]+ committed`, 'm');
  await new Promise<void>((res, rej) => {
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (committed.test(stderr)) res();
    });
    child.once('exit', () => rej(new Error(`exited before a checkpoint of ${epoch}: ${stderr}`)));
  });
  process.kill(-child.pid!, 'SIGINT');
  const code = await new Promise<number | null>((res) => {
    if (child.exitCode !== null) res(child.exitCode);
    else child.once('exit', (c) => res(c));
  });
  await new Promise((r) => setImmediate(r));
  return { code, stderr };
}

const INTERRUPTED =
  /^detsim: the (run|resumed run) was interrupted at step ([0-9]+); resume with `detsim resume (\S+)` \(last checkpoint (ckpt-e[0-9]+-[0-9]+)\)$/;

/** The one `detsim:` line an interrupted session printed, parsed, and checked against the run directory. */
function checkInterrupted(stderr: string, dir: string, what: string) {
  const ours = stderr.split('\n').filter((l) => l.startsWith('detsim:'));
  expect(ours, stderr).toHaveLength(1);
  const m = INTERRUPTED.exec(ours[0]!);
  expect(m, ours[0]).not.toBeNull();
  const [, who, step, shownDir, checkpoint] = m!;
  expect(who).toBe(what);
  expect(shownDir).toBe(dir);
  const summary = parseStrict(readFileSync(join(dir, 'summary.json'))) as { status: string; stepsDone: number };
  expect(summary).toMatchObject({ status: 'aborted', stepsDone: Number(step) });
  const store = parseStrict(readFileSync(join(dir, 'store', 'manifest.json'))) as { highWater: string };
  expect(checkpoint).toBe(store.highWater);
  expect(existsSync(join(dir, 'run.lock'))).toBe(false);
  for (const pid of workerPids(dir)) expect(isAlive(pid), `worker ${pid}`).toBe(false);
  return checkpoint!;
}

const endLines = (stdout: string) =>
  stdout.split('\n').filter((l) => /^(behaviour digest|repro hash|rewards) /.test(l));

describe('Ctrl-C (CLI)', () => {
  it('[STORE-20] an interrupted run and an interrupted resume each end in one line naming `detsim resume`; resumed to the end, it is the uninterrupted run', async () => {
    const out = tmpOut('detsim-interrupt-');
    const dir = join(out, 'runs', 'forage-walkers-1');
    const run = ['run', EXAMPLE, '--steps', STEPS, '--checkpoint-every', '100', '--out', join(out, 'runs')];
    const first = await interruptAfterCheckpoint(run, 'e1');
    expect(first.code).toBe(130);
    expect(checkInterrupted(first.stderr, dir, 'run')).toMatch(/^ckpt-e1-/);

    const second = await interruptAfterCheckpoint(['resume', dir], 'e2');
    expect(second.code).toBe(130);
    expect(checkInterrupted(second.stderr, dir, 'resumed run')).toMatch(/^ckpt-e2-/);

    const resumed = detsimCli(['resume', dir], 200_000);
    expect(resumed.status, resumed.stderr).toBe(0);
    const whole = detsimCli(['run', EXAMPLE, '--steps', STEPS, '--out', join(out, 'whole')], 200_000);
    expect(whole.status, whole.stderr).toBe(0);
    expect(endLines(resumed.stdout)).toHaveLength(3);
    expect(endLines(resumed.stdout)).toEqual(endLines(whole.stdout));
    const diff = detsimCli(['diff', dir, join(out, 'whole', 'forage-walkers-1')]);
    expect(diff.status, diff.stdout).toBe(0);
  }, 420_000);
});
