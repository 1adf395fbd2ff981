// The progress display of `detsim run`, `detsim resume` and `detsim fork` on stderr: a cli-progress
// bar on a TTY, plain lines otherwise (at most one a second, plus the last), each with the rate and
// the ETA. The rate counts the steps this session took since its stepping began (a resumed run
// starts at its checkpoint's boundary; a recovery starts stepping again), never the kept ones.
// Only display: the numbers come from the session loop's onProgress (session.ts).
import cliProgress from 'cli-progress';
import type { RunProgress } from '../session/run.js';

/** Seconds as `42s` or `3m07s`; `?` when unknown. */
export function formatEta(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${Math.round(seconds)}s`;
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)}m${String(whole % 60).padStart(2, '0')}s`;
}

/** Steps per second since the last time stepping (re)started, and the ETA at that rate. */
function pacer(): (p: RunProgress) => { rate: number; eta: number } {
  let from = 0;
  return (p) => {
    // elapsedMs 0: stepping (re)starts here (the session's start, a resume's boundary, a recovery).
    if (p.elapsedMs === 0) from = p.step;
    const rate = p.elapsedMs > 0 ? ((p.step - from) * 1000) / p.elapsedMs : 0;
    return { rate, eta: rate > 0 ? (p.steps - p.step) / rate : Infinity };
  };
}

/** A cli-progress bar on stderr in `format`, started by its first update (`run`, `resume`, `fork`, `sweep`). */
export function stderrBar(format: string): {
  update: (value: number, total: number, payload: Record<string, unknown>) => void;
  stop: () => void;
} {
  const bar = new cliProgress.SingleBar(
    { format, stream: process.stderr, hideCursor: true },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  return {
    update: (value, total, payload) => {
      if (!started) bar.start(total, value, payload);
      else bar.update(value, payload);
      started = true;
    },
    stop: () => {
      if (started) bar.stop();
    },
  };
}

/** A cli-progress bar on a TTY; plain lines (at most one a second, plus the last) otherwise. */
export function progressDisplay(): { update: (p: RunProgress) => void; stop: () => void } {
  const pace = pacer();
  if (process.stderr.isTTY) {
    const bar = stderrBar('step {value}/{total} [{bar}] {rate} steps/s ETA {eta_text}');
    return {
      update: (p) => {
        const { rate, eta } = pace(p);
        bar.update(p.step, p.steps, { rate: p.elapsedMs > 0 ? rate.toFixed(1) : '-', eta_text: formatEta(eta) });
      },
      stop: bar.stop,
    };
  }
  let last = 0;
  return {
    update: (p) => {
      const { rate, eta } = pace(p);
      const now = Date.now();
      if (p.step !== p.steps && p.elapsedMs !== 0 && now - last < 1000) return;
      last = now;
      process.stderr.write(`step ${p.step}/${p.steps}  ${rate.toFixed(1)} steps/s  ETA ${formatEta(eta)}\n`);
    },
    stop: () => undefined,
  };
}

/**
 * A line on stderr at most every `everyMs` (3 s) while a long read goes on (`diff`, `replay`'s
 * checks): `<what>: reading <run dir>: step N/M`. Nothing for a read shorter than that.
 */
export function readingProgress(
  what: string,
  everyMs = 3000,
): (p: { runDir: string; step: number; steps: number }) => void {
  let last = Date.now();
  return (p) => {
    const now = Date.now();
    if (now - last < everyMs) return;
    last = now;
    process.stderr.write(`${what}: reading ${p.runDir}: step ${p.step}/${p.steps}\n`);
  };
}
