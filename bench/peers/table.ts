// Renders a PeersReport as the markdown table bench/README.md quotes, and names the largest gap.
// NOT a measurement and not the receipt: it only formats figures already in the report.
import { placement } from '../lib/transports.js';
import type { PeersReport } from './peers.js';

const fmt = (x: number | null, digits = 0): string =>
  x === null ? '—' : x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ratio = (x: number | null): string => (x === null ? 'n/a' : `${x.toFixed(2)}×`);

export interface Gap {
  what: string;
  ratio: number;
}

/** Every measured detsim ÷ peer ratio, labelled. */
export function ratios(r: PeersReport): Gap[] {
  const out: Gap[] = [];
  for (const row of r.lockstep.rows) {
    const what = (peer: string): string =>
      `steps/s at N=${row.n} (detsim walker/forage, ${row.transport} ÷ Gymnasium ${peer})`;
    if (row.ratio !== null) out.push({ what: what('AsyncVectorEnv'), ratio: row.ratio });
    if (row.ratioSync !== null) out.push({ what: what('SyncVectorEnv'), ratio: row.ratioSync });
  }
  for (const row of r.checkpoint.rows)
    if (row.ratio !== null) out.push({ what: `${row.operation} MB/s (detsim ÷ safetensors)`, ratio: row.ratio });
  return out;
}

/** The ratio farthest from parity (1×) on a log scale, in either direction. */
export function largestGap(r: PeersReport): Gap | null {
  let best: Gap | null = null;
  for (const g of ratios(r))
    if (best === null || Math.abs(Math.log(g.ratio)) > Math.abs(Math.log(best.ratio))) best = g;
  return best;
}

function why(f: { status: string; reason?: string }): string {
  return f.status === 'unavailable' ? ` (unavailable: ${f.reason})` : '';
}

/** detsim's own side has no "unavailable": when it has no figure, it failed (or its transport is not in this build). */
function failed(f: { status: string; reason?: string }): string {
  return f.status === 'unavailable' ? ` FAILED: ${f.reason}` : f.status === 'skipped' ? ` skipped: ${f.reason}` : '';
}

export function peersTable(r: PeersReport): string {
  const lines: string[] = [];
  lines.push(
    '| N | detsim on | detsim agent-steps/s | AsyncVectorEnv env-steps/s (N processes) | detsim ÷ Async | ' +
      'SyncVectorEnv env-steps/s | detsim ÷ Sync |',
  );
  lines.push('| --: | --- | --: | --: | --: | --: | --: |');
  for (const row of r.lockstep.rows) {
    const d = row.detsim.status === 'measured' ? row.detsim : null;
    const g = row.gymnasium.status === 'measured' ? row.gymnasium : null;
    const gs = row.gymnasiumSync.status === 'measured' ? row.gymnasiumSync : null;
    const where = d ? placement(row.transport, d.agentWorkers) : row.transport;
    const rate = d ? fmt(d.agentStepsPerSec) : row.detsim.status === 'skipped' ? 'skipped' : '—';
    lines.push(
      `| ${row.n} | ${where} | ${rate} | ${fmt(g?.envStepsPerSec ?? null)} | ${ratio(row.ratio)} | ` +
        `${fmt(gs?.envStepsPerSec ?? null)} | ${ratio(row.ratioSync)} |`,
    );
  }
  lines.push('');
  const mib = r.checkpoint.stateBytes / (1024 * 1024);
  lines.push(`| ${mib} MiB state | detsim MB/s | safetensors MB/s | detsim ÷ peer |`);
  lines.push('| --- | --: | --: | --: |');
  for (const row of r.checkpoint.rows) {
    lines.push(`| ${row.operation} | ${fmt(row.detsimMBps)} | ${fmt(row.safetensorsMBps)} | ${ratio(row.ratio)} |`);
  }
  const notes = [
    ...r.lockstep.rows.map((row) => failed(row.detsim) && `detsim N=${row.n} ${row.transport}${failed(row.detsim)}`),
    ...r.lockstep.sizes.map((n) => {
      const row = r.lockstep.rows.find((x) => x.n === n);
      return row && why(row.gymnasium) && `Gymnasium N=${n}${why(row.gymnasium)}`;
    }),
    failed(r.checkpoint.detsim) && `detsim checkpoint${failed(r.checkpoint.detsim)}`,
    why(r.checkpoint.safetensors) && `safetensors${why(r.checkpoint.safetensors)}`,
  ].filter((x) => x);
  if (notes.length > 0) lines.push('', ...notes.map((n) => `- ${n}`));
  const gap = largestGap(r);
  lines.push(
    '',
    gap === null
      ? 'Largest gap: none measured (no ratio available).'
      : `Largest gap: ${gap.what} = ${gap.ratio.toFixed(2)}×.`,
  );
  return lines.join('\n');
}
