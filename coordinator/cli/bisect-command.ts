// `detsim bisect <run-a> <run-b> [--rerun auto|always|never] [--json]`: where two runs of one config
// first diverge — from their traces, their checkpoints' states and, when a worker's hidden state
// diverged before its behaviour did, a re-run of the window with a checkpoint after every step.
// Exit 0 when they do not diverge, 1 when a divergence is named, 2 for refused input. Only argument
// handling and the lines; the work is coordinator/diff0/bisect.ts. It hands bisect the state codec
// of the workers (the coordinator does not import workers/; this is the composition root).
import type { Command } from 'commander';
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { decodeState, encodeState } from '../../workers/state-codec.js';
import {
  bisectRuns,
  RERUN_MODES,
  type BisectReport,
  type BisectRunFacts,
  type FirstDivergence,
  type RerunMode,
} from '../diff0/bisect.js';
import type { CodeVersion } from '../diff0/bisect-compare.js';
import type { StateDifference } from '../diff0/bisect-states.js';
import { action, ExitError, readChoiceFlag, writeStdout } from './common.js';

const show = (v: JsonValue | null): string => JSON.stringify(v);

function runLine(label: string, r: BisectRunFacts): string {
  const ck = r.checkpoints.length === 0 ? 'no checkpoints' : `checkpoints at ${r.checkpoints.join(', ')}`;
  return `${label}${r.runDir}: ReproHash ${r.reproHash}, ${r.steps} steps, ${ck}`;
}

/** One line per model version pair, naming every participant that runs it. */
function versionLines(versions: readonly CodeVersion[], names: [string, string]): string[] {
  const groups = new Map<string, CodeVersion[]>();
  for (const v of versions) {
    const key = `${v.left}\n${v.right}`;
    groups.set(key, [...(groups.get(key) ?? []), v]);
  }
  return [...groups.values()].map((vs) => {
    const who = vs.map((v) => `${v.kind} ${v.participantId}`).join(', ');
    return `code version     ${who}: ${vs[0]!.left} (${names[0]}) vs ${vs[0]!.right} (${names[1]}); compared as two versions of one config (model identity and profile digests set aside)`;
  });
}

function traceLine(r: BisectReport, names: [string, string]): string {
  const d = r.trace;
  if (!d) return `trace            the traces agree (${r.left.steps} steps)`;
  const where = d.part === 'step' || d.part === 'steps-count' ? `step ${d.step ?? '?'}` : `the ${d.part}`;
  const agent = d.agentId ? ` (agent ${d.agentId})` : '';
  return `trace            first differs at ${where}${agent}: ${d.path}: ${names[0]} ${show(d.left)}, ${names[1]} ${show(d.right)}`;
}

function differenceText(d: StateDifference, names: [string, string]): string {
  const who = d.kind === 'agent' ? `agent ${d.participantId}` : `environment ${d.participantId}`;
  if (!d.field) return `${who}: state digest ${d.leftDigest} (${names[0]}) vs ${d.rightDigest} (${names[1]})`;
  return `${who} ${d.field.path || '(participant)'}: ${names[0]} ${show(d.field.left)}, ${names[1]} ${show(d.field.right)}`;
}

function statesLine(r: BisectReport, names: [string, string]): string {
  const s = r.states;
  if (s.common.length === 0)
    return 'checkpoints      none committed at a boundary both runs share: hidden state not compared (run with --checkpoint-every K --keep N)';
  if (s.firstDiffering === null)
    return `checkpoints      every state agrees at all ${s.common.length} common boundaries`;
  const agreed = s.lastEqual === null ? 'no earlier common boundary' : `states agree at boundary ${s.lastEqual}`;
  const others = s.differences.length > 1 ? ` (and ${s.differences.length - 1} more)` : '';
  return `checkpoints      ${agreed}; first differ at boundary ${s.firstDiffering}: ${differenceText(s.differences[0]!, names)}${others}`;
}

function rerunLine(r: BisectReport, names: [string, string]): string | null {
  const x = r.rerun;
  if (!x) return null;
  const from =
    x.from === 0
      ? 'afresh from step 0'
      : `from ${x.checkpoints[0]} (${names[0]}) and ${x.checkpoints[1]} (${names[1]})`;
  const head = `re-run           boundaries ${x.from}→${x.to} ${from}, a checkpoint after every step`;
  if (x.outcome === 'failed' || x.outcome === 'not-reproduced') return `${head}: ${x.message}`;
  // Only true or null here (a re-run that gave back another state is 'not-reproduced').
  const unchecked = names.filter((_, i) => x.reproduced[i] !== true);
  const back =
    unchecked.length === 0
      ? `; each re-run gave back its run’s own state at boundary ${x.to}`
      : ` (${unchecked.join(' and ')}: no checkpoint at boundary ${x.to} to check the re-run against)`;
  if (x.outcome === 'equal') return `${head}: every state agrees up to boundary ${x.to}${back}`;
  return `${head}${back}`;
}

function firstLine(f: FirstDivergence, r: BisectReport, names: [string, string]): string {
  const who = f.participantId ? ` ${f.kind ?? 'agent'} ${f.participantId}` : '';
  const values = `${f.path}: ${names[0]} ${show(f.left)}, ${names[1]} ${show(f.right)}`;
  const t = r.trace?.step ?? null;
  const later = t === null ? ' (the traces never show it)' : ` (the trace shows a divergence first at step ${t})`;
  if (f.source === 'step-state') {
    const b = Number(f.step) + 1;
    return `first divergence step ${f.step} (the state after it, boundary ${b}):${who} ${values}${later}`;
  }
  if (f.source === 'checkpoint-state')
    return `first divergence between boundaries ${f.window![0]} and ${f.window![1]} (steps ${f.window![0]}–${f.window![1] - 1}):${who} ${values}${later}`;
  return `first divergence step ${f.step ?? r.trace?.part}:${who} ${values}${unchecked(r)}`;
}

/**
 * For an answer from the trace alone: the steps between the last checkpoint at or before it (where
 * every state agreed) and it, where a hidden state divergence was not looked for.
 */
function unchecked(r: BisectReport): string {
  const t = r.trace?.step == null ? null : Number(r.trace.step);
  if (r.rerun || t === null) return '';
  const from = r.states.common.filter((b) => b <= t).pop() ?? 0;
  if (from >= t) return '';
  return ` (from the trace; a hidden state divergence in steps ${from}–${t - 1} is not ruled out: --rerun always re-runs them)`;
}

/** The report as lines for people. */
export function describeBisect(r: BisectReport): string[] {
  const names: [string, string] = [r.left.runDir, r.right.runDir];
  const lines = [runLine('run a            ', r.left), runLine('run b            ', r.right)];
  lines.push(...versionLines(r.codeVersions, names));
  lines.push(traceLine(r, names));
  lines.push(statesLine(r, names));
  const re = rerunLine(r, names);
  if (re) lines.push(re);
  if (r.first) lines.push(firstLine(r.first, r, names));
  else {
    const hashes = r.codeVersions.length > 0 ? ' (their ReproHashes differ only by the model sources above)' : '';
    lines.push(`DIFF=0: the runs do not diverge: traces and every common checkpoint's state agree${hashes}`);
  }
  return lines;
}

export function registerBisect(program: Command): void {
  program
    .command('bisect')
    .description(
      'name where two runs of one config first diverge: step, agent, field and both values, from the traces, the checkpoints and, for hidden state, a re-run of the window (exit 0 none, 1 named)',
    )
    .argument('<run-a>', 'run directory')
    .argument('<run-b>', 'run directory of the same config (a user model may be another version)')
    .option(
      '--rerun <mode>',
      `re-run a window of steps: ${RERUN_MODES.join(' | ')} (default auto: when the traces cannot say)`,
    )
    .option('--json', 'print one canonical JSON object')
    .action(
      action(async (a: string, b: string, opts: { rerun?: string; json?: boolean }) => {
        const rerun = readChoiceFlag<RerunMode>(opts.rerun, RERUN_MODES, '--rerun') ?? 'auto';
        const report = await bisectRuns(a, b, {
          codec: { decode: decodeState, encode: encodeState },
          rerun,
          onEvent: (line) => process.stderr.write(`${line}\n`),
        });
        if (opts.json) writeStdout(canonicalize(report as unknown as JsonValue));
        else for (const line of describeBisect(report)) writeStdout(line);
        if (!report.same) throw new ExitError(1, '');
      }),
    );
}
