// The local sweep runner behind `detsim sweep <file>`: every run not yet done is run by one child
// process `detsim sweep task <dir> <i> --ipc` (its own coordinator, so runs use separate cores), at
// most `parallel` at once, in the sweep's order. Children report progress and their outcome over
// the IPC channel; the runner sums them into one progress for the whole sweep (runs done,
// agent-steps/s, ETA) and reports each finished run once. Children get their own process group:
// Ctrl-C reaches the runner alone, which stops starting runs and passes SIGINT on exactly once, so
// each running child stops like `detsim run` does (its checkpoints kept for the next continue); a
// child whose runner vanished sees its IPC channel close and stops the same way. NOT one run
// (task.ts) and not the display (cli/sweep-command.ts).
import { fork, type ChildProcess } from 'node:child_process';
import type { RunProgress } from '../session/session.js';
import type { RewardTotals } from '../session/metrics.js';
import { runDirOf } from './sweep-dir.js';
import type { SweepPlanned, SweepRun } from './sweep-file.js';
import { runStateOf, type RunState } from './run-state.js';
import type { SweepIndex } from './sweep-dir.js';

/** What a task child sends its runner. */
export type TaskMessage =
  | { t: 'progress'; step: number; steps: number; elapsedMs: number }
  | {
      t: 'done';
      action: string;
      reproHash: string | null;
      steps: number;
      wallTimeMs: number | null;
      rewards: RewardTotals | null;
    };

/** One finished run, as the runner reports it. */
export interface FinishedRun {
  run: SweepRun;
  runDir: string;
  /** skipped: done before; ran: started, restarted or resumed now; failed; interrupted. */
  outcome: 'skipped' | 'started' | 'restarted' | 'resumed' | 'failed' | 'interrupted';
  reproHash: string | null;
  rewardTotal: number | null;
  wallTimeMs: number | null;
  /** A failure's last line from the child. */
  why: string | null;
}

/** The whole sweep's progress. */
export interface SweepProgress {
  runsDone: number;
  runs: number;
  running: number;
  agentStepsDone: number;
  agentSteps: number;
  /** Agent-steps per second since this invocation began (a resumed run's kept steps are not counted as taken). */
  rate: number;
}

export interface RunnerOptions {
  parallel: number;
  /** The detsim CLI entry the children run (dist/coordinator/cli/main.js). */
  cli: string;
  onFinished: (f: FinishedRun) => void;
  onProgress: (p: SweepProgress) => void;
}

export interface SweepOutcome {
  finished: FinishedRun[];
  interrupted: boolean;
}

interface Running {
  run: SweepRun;
  child: ChildProcess;
  step: number;
  /** The step it reported first (a resumed run's boundary): steps before it were not taken now. */
  first: number | null;
  stderr: string[];
  done: Extract<TaskMessage, { t: 'done' }> | null;
}

const agentsOf = (r: SweepRun) => r.plan.agents.length;
const totalOf = (r: SweepRun) => r.plan.steps * agentsOf(r);

function skippedOf(run: SweepRun, runDir: string, state: Extract<RunState, { kind: 'done' }>): FinishedRun {
  const rewards = state.summary.rewards as unknown as RewardTotals | undefined;
  return {
    run,
    runDir,
    outcome: 'skipped',
    reproHash: state.reproHash,
    rewardTotal: rewards?.total ?? null,
    wallTimeMs: null,
    why: null,
  };
}

/** The runs not yet done, queued in order; the done ones reported as skipped. */
class SweepScheduler {
  private readonly finished: FinishedRun[] = [];
  /** Runs found done before starting: reported when the sweep runs. */
  private readonly skipped: FinishedRun[] = [];
  private readonly queue: SweepRun[] = [];
  private readonly running = new Map<number, Running>();
  private agentStepsDone = 0;
  private readonly agentSteps: number;
  private interrupted = false;
  // The rate is the whole sweep's: agent-steps this invocation took (start-ups and restores included) per second.
  private readonly began = Date.now();
  private takenDone = 0;
  private resolveAll: (o: SweepOutcome) => void = () => undefined;
  private readonly onSignal = () => this.interrupt();

  constructor(
    private readonly sweepDir: string,
    private readonly index: SweepIndex,
    private readonly planned: SweepPlanned,
    private readonly opts: RunnerOptions,
  ) {
    this.agentSteps = planned.runs.reduce((a, r) => a + totalOf(r), 0);
    for (const run of planned.runs) {
      const state = runStateOf(runDirOf(sweepDir, run), index.runs[run.index]!);
      if (state.kind !== 'done') this.queue.push(run);
      else {
        this.agentStepsDone += totalOf(run);
        this.skipped.push(skippedOf(run, runDirOf(sweepDir, run), state));
      }
    }
  }

  run(): Promise<SweepOutcome> {
    return new Promise((resolveAll) => {
      this.resolveAll = resolveAll;
      for (const f of this.skipped) this.report(f);
      process.on('SIGINT', this.onSignal);
      process.on('SIGTERM', this.onSignal);
      this.next();
    });
  }

  private report(f: FinishedRun): void {
    this.finished.push(f);
    this.opts.onFinished(f);
  }

  /** Ctrl-C / SIGTERM: start nothing more, pass SIGINT on to each running child once. */
  private interrupt(): void {
    if (this.interrupted) return;
    this.interrupted = true;
    for (const r of this.running.values()) r.child.kill('SIGINT');
    if (this.running.size === 0) this.finish();
  }

  private finish(): void {
    process.off('SIGINT', this.onSignal);
    process.off('SIGTERM', this.onSignal);
    this.resolveAll({ finished: this.finished, interrupted: this.interrupted });
  }

  private next(): void {
    while (!this.interrupted && this.running.size < this.opts.parallel && this.queue.length > 0)
      this.launch(this.queue.shift()!);
    this.progress();
    if (this.running.size === 0) this.finish();
  }

  private progress(): void {
    let inFlight = 0;
    let taken = this.takenDone;
    for (const r of this.running.values()) {
      inFlight += r.step * agentsOf(r.run);
      taken += takenBy(r);
    }
    const elapsed = Date.now() - this.began;
    this.opts.onProgress({
      runsDone: this.finished.filter((f) => f.outcome !== 'failed' && f.outcome !== 'interrupted').length,
      runs: this.planned.runs.length,
      running: this.running.size,
      agentStepsDone: this.agentStepsDone + inFlight,
      agentSteps: this.agentSteps,
      rate: elapsed > 0 ? (taken * 1000) / elapsed : 0,
    });
  }

  private launch(run: SweepRun): void {
    const child = fork(this.opts.cli, ['sweep', 'task', this.sweepDir, String(run.index), '--ipc'], {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      detached: true,
    });
    const r: Running = { run, child, step: 0, first: null, stderr: [], done: null };
    this.running.set(run.index, r);
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      r.stderr.push(...chunk.split('\n'));
      if (r.stderr.length > 20) r.stderr.splice(0, r.stderr.length - 20);
    });
    child.on('message', (m: TaskMessage) => {
      if (m.t !== 'progress') r.done = m;
      else {
        r.step = m.step;
        r.first ??= m.step;
        this.progress();
      }
    });
    child.on('close', (code, signal) => this.ended(r, code, signal));
  }

  /** The run's state as its directory holds it; null when it cannot be read (the task's own error says why). */
  private stateOnDisk(run: SweepRun, runDir: string): RunState | null {
    try {
      return runStateOf(runDir, this.index.runs[run.index]!);
    } catch {
      return null;
    }
  }

  private ended(r: Running, code: number | null, signal: NodeJS.Signals | null = null): void {
    this.running.delete(r.run.index);
    const runDir = runDirOf(this.sweepDir, r.run);
    const ok = code === 0 && r.done !== null;
    // Interrupted after its last step was written (receipt and summary on disk): the run is done.
    const state = ok ? null : this.stateOnDisk(r.run, runDir);
    if (state?.kind === 'done') {
      this.agentStepsDone += totalOf(r.run);
      this.takenDone += takenBy(r);
      this.report({ ...skippedOf(r.run, runDir, state), outcome: 'started' });
      return this.next();
    }
    if (ok) this.agentStepsDone += totalOf(r.run);
    this.takenDone += takenBy(r);
    // Why it failed: its refusal line ("detsim: [reason] …"; the "run directory" line after it
    // says nothing the sweep's line does not), else its last line; a task that said nothing: how
    // it ended (a signal has no exit code).
    const said = r.stderr.filter((l) => l.trim() !== '');
    const last =
      said.filter((l) => l.startsWith('detsim: [')).pop() ??
      said.pop() ??
      (code === null ? `ended by ${signal ?? 'a signal'}` : `exit ${code}`);
    this.report({
      run: r.run,
      runDir,
      outcome: ok
        ? (r.done!.action as FinishedRun['outcome'])
        : code === 130 || this.interrupted
          ? 'interrupted'
          : 'failed',
      reproHash: r.done?.reproHash ?? null,
      rewardTotal: r.done?.rewards?.total ?? null,
      wallTimeMs: r.done?.wallTimeMs ?? null,
      why: ok ? null : last.replace(/^detsim: /, ''),
    });
    this.next();
  }
}

const takenBy = (r: Running) => (r.step - (r.first ?? r.step)) * agentsOf(r.run);

/**
 * The sweep in `sweepDir` ready to run: every run's state read first (a done run whose receipt no
 * longer binds its trace is refused here, naming it, before anything starts); `run()` then runs
 * every run not yet done.
 */
export function prepareSweep(
  sweepDir: string,
  index: SweepIndex,
  planned: SweepPlanned,
  opts: RunnerOptions,
): { run: () => Promise<SweepOutcome> } {
  const scheduler = new SweepScheduler(sweepDir, index, planned, opts);
  return { run: () => scheduler.run() };
}

/** The IPC side of a task child: progress (at most every 250 ms, plus each restart and the end) and the outcome; a closed channel aborts the run. */
export function taskReporter(): {
  onProgress: (p: RunProgress) => void;
  send: (m: TaskMessage) => Promise<void>;
  signal: AbortSignal;
} {
  const controller = new AbortController();
  process.on('disconnect', () => controller.abort());
  const send = (m: TaskMessage) =>
    new Promise<void>((done) => {
      if (!process.connected) return done();
      process.send!(m, undefined, {}, () => done());
    });
  let last = 0;
  return {
    onProgress: (p) => {
      const now = Date.now();
      if (p.elapsedMs !== 0 && p.step !== p.steps && now - last < 250) return;
      last = now;
      void send({ t: 'progress', step: p.step, steps: p.steps, elapsedMs: p.elapsedMs });
    },
    send,
    signal: controller.signal,
  };
}
