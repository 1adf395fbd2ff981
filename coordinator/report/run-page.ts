// The body of a run's report page: the DIFF=0 verdict (receipt, and a verify attestation when there
// is one), the run's identities, its charts, the checkpoint and recovery events, notable run.log
// lines, the composition (agents, environment, workers, seeds) and run.json itself.
// NOT the page around it (html.ts) and not the reading of the run (read-run.ts).
import type { JsonValue } from '../../core/formats/canonical-json.js';
import type { AttestationMatch } from './attestation.js';
import { runCharts, type ChartSpec } from './charts.js';
import { chartSection, code, esc, facts, page, table } from './html.js';
import type { RunData } from './read-run.js';

type Obj = Record<string, JsonValue>;
const obj = (v: JsonValue | undefined): Obj => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {});

/** The receipt's verdict as a coloured box. */
export function receiptBox(d: RunData): string {
  const v = d.verdict;
  const steps = `${d.series.steps} steps`;
  if (v.status === 'none')
    return `<div class="verdict grey"><b>No DIFF=0 verdict:</b> ${esc(d.runId)} has no receipt.json (a run that did not finish, or is still running). The trace was read and checked against its index (${esc(steps)}).</div>`;
  if (v.status === 'diff0')
    return `<div class="verdict green"><b>DIFF=0</b> against its receipt: the ReproHash recomputed from the trace (${esc(steps)}, every segment checked against the SHA-256 receipt.json binds) is <code>${esc(v.recomputedReproHash)}</code>, the one receipt.json records.</div>`;
  return `<div class="verdict red"><b>DIFF≠0</b> against its receipt: receipt.json records ReproHash <code>${esc(v.receiptReproHash)}</code>, the trace, run.json and summary.json give <code>${esc(v.recomputedReproHash)}</code> now (${esc(steps)}).</div>`;
}

/** A verify attestation's word on this run (or on a sweep run), as a box. */
export function attestationBox(m: AttestationMatch | null): string {
  if (m === null) return '';
  const where = `<code>${esc(m.path)}</code> (verdict ${esc(m.verdict)}, verdict hash <code>${esc(m.verdictHash.slice(0, 16))}…</code>, checked against its checks)`;
  if (m.replay !== null) {
    const cls = m.verdict === 'green' ? 'green' : 'yellow';
    return `<div class="verdict ${cls}"><b>detsim verify:</b> ${where} replayed configuration <b>${esc(m.replay.subject)}</b> in ${esc(m.replay.runs)} fresh runs with DIFF=0 at ReproHash <code>${esc(m.replay.reproHash)}</code>, this run's ReproHash.</div>`;
  }
  return `<div class="verdict yellow"><b>detsim verify:</b> ${where} has no passing replay with this run's ReproHash; it replayed ${esc(m.replayed.join(', ') || 'nothing')}.</div>`;
}

function warnings(d: RunData): string {
  const out: string[] = [];
  if (d.locked)
    out.push(
      'run.lock is present: a run or resume may be writing this directory; this report shows the files as they were read.',
    );
  if (d.ledger.present && !d.ledger.chain.ok)
    out.push(
      `ledger.jsonl's hash chain does not hold: ${d.ledger.chain.problem ?? ''} — its events below are as the file says.`,
    );
  return out.map((w) => `<div class="verdict red">${esc(w)}</div>`).join('\n');
}

function identities(d: RunData): string {
  const s = d.summary ?? {};
  const platform = obj(d.verdict.platform as JsonValue);
  const detsim = obj(platform.detsim);
  const env = d.run.environment;
  return facts([
    ['session', code(d.run.sessionId)],
    ['run id', code(d.runId)],
    ['run directory', code(d.runDir)],
    [
      'status',
      `${String(s.status ?? 'unknown')}: ${String(s.stepsDone ?? '?')} of ${String(s.stepsPlanned ?? d.run.steps)} steps`,
    ],
    ['epochs', d.series.epochs.map((e) => `${e.epoch} from step ${e.fromStep}`).join(', ') || '—'],
    ['master seed', code(d.run.masterSeed)],
    ['seed derivation', code(d.run.seedDerivation)],
    ['environment seed', code(`${env.environmentId}: ${env.seed}`)],
    ['agent seeds', code(d.run.agents.map((a) => `${a.agentId}=${a.seed}`).join(' '))],
    ['ReproHash (receipt.json)', code(d.verdict.receiptReproHash ?? '— (no receipt)')],
    ['behaviour digest (summary.json)', code(s.behaviourDigest ?? '—')],
    ['protocol contract digest', code(d.run.protocol.contractDigest)],
    ['receipt made', d.verdict.generatedAt ?? '—'],
    ['detsim (receipt)', detsim.version ? code(`${String(detsim.version)} ${String(detsim.gitCommit ?? '')}`) : '—'],
    ['wall time (summary.json)', typeof s.wallTimeMs === 'number' ? `${(s.wallTimeMs / 1000).toFixed(1)} s` : '—'],
  ]);
}

function eventsSection(d: RunData): string {
  const l = d.ledger;
  const chain = l.present ? (l.chain.ok ? `hash chain holds over ${l.chain.lines} lines` : 'hash chain broken') : '';
  const ledger = l.present
    ? table(
        ['line', 'event', 'epoch', 'step', 'checkpoint', 'detail'],
        l.timeline.map((e) => [e.seq, e.event, e.epoch, e.step, e.checkpointId, e.note]),
      )
    : '<p>No ledger.jsonl: the run took no checkpoints.</p>';
  const recoveries = l.timeline.filter((e) => e.event === 'recovery').length;
  const resumes = l.timeline.filter((e) => e.event === 'restored' && e.note.startsWith('resume')).length;
  const log = table(
    ['time', 'message', 'detail'],
    d.log.events.map((e) => [e.time, e.msg, e.detail]),
  );
  const more = d.log.more > 0 ? `<p class="note">${d.log.more} more such lines not shown.</p>` : '';
  return `<h2>Checkpoints, resumes and recoveries</h2>
<p class="note">ledger.jsonl (${esc(chain || 'absent')}). Recoveries from a lost worker: ${recoveries}; resumes: ${resumes}.</p>
${ledger}
<h2>run.log</h2><p class="note">Start, restore, recovery and end lines, workers that died (a signal or a non-zero exit; workers fenced during a recovery too) and errors.</p>
${log}${more}`;
}

function composition(d: RunData): string {
  const r = d.run;
  const totals = new Map(d.series.agentTotals.map((a) => [a.agentId, a.reward]));
  const agents = table(
    ['agent', 'model', 'version', 'worker', 'seed', 'params', 'total reward'],
    r.agents.map((a) => [
      a.agentId,
      a.model,
      a.modelVersion,
      a.workerId,
      a.seed,
      code(JSON.stringify(a.params)),
      totals.get(a.agentId) ?? 0,
    ]),
  );
  const e = r.environment;
  const env = facts([
    ['environment', `${e.environmentId}: ${e.model} ${e.modelVersion} on ${e.workerId}`],
    ['params', code(JSON.stringify(e.params))],
    ['steps, dispatch, transport', `${r.steps}, ${r.dispatch}, ${r.transport}`],
  ]);
  const workers = table(
    ['worker', 'role', 'runtime', 'agents'],
    r.workers.map((w) => [w.workerId, w.role, w.runtime, w.agentIds.join(' ')]),
  );
  return `<h2>Composition</h2>${env}${agents}${workers}
<details><summary>run.json</summary><pre>${esc(JSON.stringify(d.raw, null, 1))}</pre></details>`;
}

/** The run's report page and the charts on it. */
export function runPage(d: RunData, attestation: AttestationMatch | null): { html: string; charts: ChartSpec[] } {
  const charts = runCharts(d);
  const body = `<h1>detsim report: ${esc(d.runId)}</h1>
<p class="meta">Run directory <code>${esc(d.runDir)}</code>, session <code>${esc(d.run.sessionId)}</code>.</p>
${receiptBox(d)}
${attestationBox(attestation)}
${warnings(d)}
<h2>Identities</h2>
${identities(d)}
${charts.map(chartSection).join('\n')}
${eventsSection(d)}
${composition(d)}`;
  return { html: page(`detsim report: ${d.runId}`, body, charts), charts };
}
