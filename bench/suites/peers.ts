// Suite `peers`: detsim beside what researchers use instead, same machine, same run — walker agents
// on forage on each transport (unix, thread, thread with the environment inline, inline) beside Gymnasium AsyncVectorEnv and
// SyncVectorEnv (N = 1, 4, 16), and a 256 MiB durable checkpoint commit and restore beside
// safetensors. NOT the peers themselves (bench/peers/) and never a made-up figure.
import { placement } from '../lib/transports.js';
import { runPeers, type GymFigures, type GymVector, type LockstepRow, type PeersReport } from '../peers/peers.js';
import { largestGap, peersTable } from '../peers/table.js';
import { withLimit, type BenchSuite, type Figure } from '../lib/suite.js';

function unavailableNote(f: { status: string; reason?: string }): string | undefined {
  return f.status === 'unavailable' ? `peer unavailable: ${f.reason}` : undefined;
}

function peerName(g: GymFigures): string {
  return g.vector === 'async'
    ? `Gymnasium AsyncVectorEnv env-steps/s (${g.processes} subprocess${g.processes === 1 ? '' : 'es'})`
    : `Gymnasium SyncVectorEnv env-steps/s (${g.n} env${g.n === 1 ? '' : 's'} in one process)`;
}

/** A measured detsim row beside one Gymnasium vector env: `gymnasium.n16.thread`, `gymnasium-sync.n16.thread`. */
function gymFigure(row: LockstepRow, vector: GymVector): Figure | null {
  const g = vector === 'async' ? row.gymnasium : row.gymnasiumSync;
  const idPrefix = vector === 'async' ? 'gymnasium' : 'gymnasium-sync';
  const d = row.detsim;
  if (d.status !== 'measured') return null;
  const note = unavailableNote(g);
  return {
    ...withLimit(
      {
        id: `${idPrefix}.n${row.n}.${row.transport}`,
        name:
          `walker/forage agent-steps/s, N=${row.n}, ${placement(row.transport, d.agentWorkers)}, ` +
          `beside ${vector === 'async' ? 'Async' : 'Sync'}VectorEnv`,
        value: d.agentStepsPerSec,
        unit: 'steps/s',
        higherIsBetter: true,
        samples: d.steps,
      },
      g.status === 'measured' ? { name: peerName(g), value: g.envStepsPerSec } : null,
    ),
    ...(note ? { note } : {}),
  };
}

/** One harness figure per comparison whose detsim side was measured; the peer is its limit when measured. */
export function peersFigures(r: PeersReport): Figure[] {
  const figures: Figure[] = [];
  for (const row of r.lockstep.rows)
    for (const f of [gymFigure(row, 'async'), gymFigure(row, 'sync')]) if (f) figures.push(f);
  const d = r.checkpoint.detsim;
  const s = r.checkpoint.safetensors;
  const mib = r.checkpoint.stateBytes / (1024 * 1024);
  if (d.status === 'measured') {
    const pairs = [
      {
        id: 'safetensors.save',
        name: `durable commit of ${mib} MiB (CheckpointStore)`,
        value: d.save.mbPerSec,
        peer: s.status === 'measured' ? s.save.mbPerSec : null,
        peerName: 'safetensors save_file + fsync',
      },
      {
        id: 'safetensors.load',
        name: `restore read + verify of ${mib} MiB (CheckpointStore.load)`,
        value: d.restoreVerify.mbPerSec,
        peer: s.status === 'measured' ? s.loadVerify.mbPerSec : null,
        peerName: 'safetensors load_file + SHA-256',
      },
    ];
    for (const p of pairs) {
      figures.push({
        ...withLimit(
          {
            id: p.id,
            name: p.name,
            value: p.value,
            unit: 'MB/s',
            higherIsBetter: true,
            samples: d.save.samples.length,
          },
          p.peer === null ? null : { name: p.peerName, value: p.peer },
        ),
        ...(unavailableNote(s) ? { note: unavailableNote(s) } : {}),
      });
    }
  }
  return figures;
}

/** detsim rows on a transport this build lacks: no figure, the reason instead (not a failure). */
export function skippedRows(r: PeersReport): { comparison: string; reason: string }[] {
  return r.lockstep.rows.flatMap((row) =>
    row.detsim.status === 'skipped'
      ? [{ comparison: `gymnasium.n${row.n}.${row.transport}`, reason: row.detsim.reason }]
      : [],
  );
}

/** detsim comparisons that have no figure because detsim itself failed (never a peer's fault). */
export function detsimFailures(r: PeersReport): { comparison: string; reason: string }[] {
  const out: { comparison: string; reason: string }[] = [];
  for (const row of r.lockstep.rows)
    if (row.detsim.status === 'unavailable')
      out.push({ comparison: `gymnasium.n${row.n}.${row.transport}`, reason: row.detsim.reason });
  if (r.checkpoint.detsim.status === 'unavailable')
    out.push({ comparison: 'safetensors', reason: r.checkpoint.detsim.reason });
  return out;
}

export const peers: BenchSuite = {
  name: 'peers',
  description:
    'detsim beside its peers in the same run: walker/forage on each transport (unix, thread, thread with the environment inline, inline) vs ' +
    'Gymnasium AsyncVectorEnv and SyncVectorEnv (N = 1, 4, 16); 256 MiB durable commit and restore vs ' +
    'safetensors save/load (peers from bench/.venv, pinned in bench/peers/requirements.txt)',
  async run(ctx) {
    const report = await runPeers({ quick: ctx.quick, scratch: ctx.tmpDir, log: (l) => ctx.log(l) });
    ctx.log(peersTable(report));
    const gap = largestGap(report);
    return {
      figures: peersFigures(report),
      details: {
        peers: report.peers,
        detsimFailures: detsimFailures(report),
        skippedRows: skippedRows(report),
        largestGap: gap,
        report,
      },
    };
  },
};
