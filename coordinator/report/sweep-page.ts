// The body of a sweep's report page: how many runs and how their receipts verified, the parameter
// charts and the outcome of every run (sweep.ts), and a table of every run with its overrides,
// replicate, identities and DIFF=0 verdict against its receipt. NOT the page around it (html.ts).
import type { ChartSpec } from './charts.js';
import { chartSection, code, esc, page, table } from './html.js';
import { nameOf, type SweepData } from './sweep.js';

const VERDICT = { diff0: 'DIFF=0', differs: 'DIFF≠0', none: 'no receipt' } as const;

function summaryBox(s: SweepData): string {
  const n = s.runs.length;
  const diff0 = s.runs.filter((r) => r.verdict === 'diff0').length;
  const differs = s.runs.filter((r) => r.verdict === 'differs').length;
  const completed = s.runs.filter((r) => r.status === 'completed').length;
  const cls = differs > 0 ? 'red' : diff0 === n ? 'green' : 'grey';
  const missing = s.planned === null ? 0 : s.planned - n;
  const planned =
    missing > 0
      ? ` <b>${missing} of the ${s.planned} runs sweep.json plans have no run directory</b> (not started, or removed).`
      : '';
  return `<div class="verdict ${cls}"><b>${diff0} of ${n} runs DIFF=0 against their receipts</b> (each trace checked against the SHA-256 its receipt binds, its ReproHash recomputed)${differs > 0 ? `; <b>${differs} DIFF≠0</b>` : ''}; ${completed} of ${s.planned ?? n} completed.${planned}</div>`;
}

function runsTable(s: SweepData): string {
  return table(
    [
      'run',
      ...s.paths,
      'replicate',
      'status',
      'steps',
      'total reward',
      'master seed',
      'ReproHash',
      'receipt',
      'verify',
    ],
    s.runs.map((r) => [
      code(r.runId),
      ...s.paths.map((p) => (p in r.entry.overrides ? code(JSON.stringify(r.entry.overrides[p])) : '—')),
      r.entry.replicate,
      r.status,
      r.stepsDone,
      r.totalReward,
      code(r.masterSeed),
      code(r.reproHash ?? '—'),
      VERDICT[r.verdict],
      r.attestation?.replay ? `DIFF=0 (${r.attestation.replay.subject})` : '—',
    ]),
  );
}

/** The sweep's report page and the charts on it. */
export function sweepPage(s: SweepData): { html: string; charts: ChartSpec[] } {
  const name = nameOf(s.sweepDir);
  const index = s.index
    ? `index <code>${esc(s.index)}</code>, overrides ${s.paths.map((p) => `<code>${esc(p)}</code>`).join(', ') || 'none'}`
    : `no ${esc('sweep.json')}: every run directory in it, no parameters known`;
  const body = `<h1>detsim sweep report: ${esc(name)}</h1>
<p class="meta">Sweep directory <code>${esc(s.sweepDir)}</code>, ${s.runs.length} runs; ${index}. Outcome: the total reward of all agents over a run.</p>
${summaryBox(s)}
${s.charts.map(chartSection).join('\n')}
<h2>Runs</h2>
${runsTable(s)}
<p class="note">Each run has its own report: <code>detsim report &lt;run-dir&gt;</code>.</p>`;
  return { html: page(`detsim sweep report: ${name}`, body, s.charts), charts: s.charts };
}
