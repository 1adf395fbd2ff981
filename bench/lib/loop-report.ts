// The command-line side the bench's loop scripts share (kill-loop, recover-kill-loop,
// resume-kill-loop, lock-race): reading a flag, telling whether the script was started itself (not
// imported by a test), and the closing summary — one line with the count, the time, what the
// iterations added up to, how many failed — plus the exit code (1 when any failed).
// NOT the loops, their checks or their per-iteration log lines (each script keeps its own).
import { fileURLToPath } from 'node:url';

/** The value after `name` on the command line, if given. */
export function flagValue(name: string, args: readonly string[] = process.argv.slice(2)): string | undefined {
  const i = args.indexOf(name);
  return i === -1 ? undefined : args[i + 1];
}

/** Whether the module at `moduleUrl` (pass `import.meta.url`) is the script node was started with. */
export function startedAsScript(moduleUrl: string): boolean {
  return process.argv[1] !== undefined && fileURLToPath(moduleUrl) === process.argv[1];
}

export interface LoopSummary {
  /** The loop's name, first on the line. */
  name: string;
  /** How many iterations (or rounds) ran, and what one is called. */
  count: number;
  unit: string;
  seconds: number;
  /** What the iterations added up to ("57 recoveries"), in order. */
  facts: readonly string[];
  failed: number;
  /** Said last when nothing failed ("DIFF=0"). */
  passNote?: string;
}

/** `name: N units in S s, facts…, F failed[, pass note]`. */
export function summaryLine(s: LoopSummary): string {
  const parts = [`${s.count} ${s.unit} in ${s.seconds.toFixed(1)} s`, ...s.facts, `${s.failed} failed`];
  if (s.failed === 0 && s.passNote) parts.push(s.passNote);
  return `${s.name}: ${parts.join(', ')}`;
}

export interface LoopJudgement<T> {
  unit?: string;
  /** Whether one iteration failed (loops that throw at the first failure pass () => false). */
  failed: (it: T) => boolean;
  facts?: (its: readonly T[]) => string[];
  passNote?: string;
}

/** Run a loop, print its summary line on stdout and set the exit code: 1 when any iteration failed. */
export async function reportLoop<T>(name: string, run: () => Promise<readonly T[]>, judge: LoopJudgement<T>) {
  const started = process.hrtime.bigint();
  const its = await run();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const failed = its.filter(judge.failed).length;
  process.stdout.write(
    `${summaryLine({
      name,
      count: its.length,
      unit: judge.unit ?? 'iterations',
      seconds,
      facts: judge.facts?.(its) ?? [],
      failed,
      ...(judge.passNote ? { passNote: judge.passNote } : {}),
    })}\n`,
  );
  process.exitCode = failed === 0 ? 0 : 1;
}
