// A sweep run whose task process ends interrupted (exit 130, no outcome message) after its run was
// written whole — Ctrl-C landing between the run's last file and the task's exit — is counted done,
// as its directory says (coordinator/sweep/runner.ts), not "interrupted": the sweep's last line and
// `sweep status` agree. The task runs for real (the built CLI's `sweep task`) under a wrapper that
// then exits 130; the control wrapper exits 130 without running it, and that run stays interrupted.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSweepDir, readSweepIndex } from '../../coordinator/sweep/sweep-dir.js';
import { planSweep, readSweepFile } from '../../coordinator/sweep/sweep-file.js';
import { prepareSweep, type FinishedRun } from '../../coordinator/sweep/runner.js';
import { runStateOf } from '../../coordinator/sweep/run-state.js';
import { CLI_MAIN } from '../cli-refusal.js';

const BASE = `sessionId: sweep-cut
masterSeed: "7"
steps: 40
environment: { id: forage, model: forage, params: { width: 12, height: 12, food: 6 } }
agents: { count: 2, prefix: w-, model: walker }
workers: { transport: inline }
`;

/** A one-run sweep run through `wrapper` as the CLI its task child forks; what the runner reported. */
async function sweepThrough(wrapper: string): Promise<{ finished: FinishedRun[]; sweepDir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-sweep-cut-'));
  writeFileSync(join(dir, 'base.yaml'), BASE);
  writeFileSync(
    join(dir, 'cut.yaml'),
    'name: cut\nbase: base.yaml\nreplicates: 1\ngrid: { environment.params.food: [6] }\n',
  );
  const planned = planSweep(readSweepFile(join(dir, 'cut.yaml')));
  const { dir: sweepDir } = openSweepDir(join(dir, 'sweeps'), planned);
  const index = readSweepIndex(sweepDir)!;
  const script = join(dir, 'wrapper.mjs');
  writeFileSync(script, wrapper.replace('CLI', JSON.stringify(resolve(CLI_MAIN))));
  const outcome = await prepareSweep(sweepDir, index, planned, {
    parallel: 1,
    cli: script,
    onFinished: () => undefined,
    onProgress: () => undefined,
  }).run();
  return { finished: outcome.finished, sweepDir };
}

describe('a sweep task interrupted after its run was written whole', () => {
  it('counts as done, with the ReproHash its receipt holds; one interrupted before is not', async () => {
    // The task runs (without --ipc: no outcome message reaches the runner), then the process exits 130.
    const cut = await sweepThrough(
      "import { spawnSync } from 'node:child_process';\n" +
        "spawnSync(process.execPath, [CLI, ...process.argv.slice(2).filter((a) => a !== '--ipc')], { stdio: 'ignore' });\n" +
        'process.exit(130);\n',
    );
    expect(cut.finished).toHaveLength(1);
    const [f] = cut.finished;
    const state = runStateOf(f!.runDir, readSweepIndex(cut.sweepDir)!.runs[0]!);
    expect(state.kind).toBe('done');
    expect(f).toMatchObject({ outcome: 'started', reproHash: state.kind === 'done' ? state.reproHash : '?' });

    const control = await sweepThrough('process.exit(130);\n');
    expect(control.finished.map((x) => x.outcome)).toEqual(['interrupted']);
  }, 120_000);

  it('a task killed by a signal before it said anything: failed, "ended by SIGKILL" (not "exit null")', async () => {
    const killed = await sweepThrough("process.kill(process.pid, 'SIGKILL');\n");
    expect(killed.finished.map((x) => [x.outcome, x.why])).toEqual([['failed', 'ended by SIGKILL']]);
  }, 120_000);
});
