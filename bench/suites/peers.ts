// Suite `peers`: detsim beside what researchers use instead, same machine, same run — walker agents
// on forage beside Gymnasium AsyncVectorEnv (N = 1, 4, 16), and a 256 MiB durable checkpoint commit
// and restore beside safetensors. NOT the peers themselves (bench/peers/) and never a made-up figure.
import { runPeers, type PeersReport } from '../peers/peers.js';
import { largestGap, peersTable } from '../peers/table.js';
import { withLimit, type BenchSuite, type Figure } from '../lib/suite.js';

function unavailableNote(f: { status: string; reason?: string }): string | undefined {
  return f.status === 'unavailable' ? `peer unavailable: ${f.reason}` : undefined;
}

/** One harness figure per comparison whose detsim side was measured; the peer is its limit when measured. */
export function peersFigures(r: PeersReport): Figure[] {
  const figures: Figure[] = [];
  for (const row of r.lockstep.rows) {
    if (row.detsim.status !== 'measured') continue;
    const g = row.gymnasium;
    figures.push({
      ...withLimit(
        {
          id: `gymnasium.n${row.n}`,
          name: `walker/forage agent-steps/s, N=${row.n} (${row.detsim.agentProcesses} agent process${row.detsim.agentProcesses === 1 ? '' : 'es'})`,
          value: row.detsim.agentStepsPerSec,
          unit: 'steps/s',
          higherIsBetter: true,
          samples: row.detsim.steps,
        },
        g.status === 'measured'
          ? {
              name: `Gymnasium AsyncVectorEnv env-steps/s (${g.processes} subprocess${g.processes === 1 ? '' : 'es'})`,
              value: g.envStepsPerSec,
            }
          : null,
      ),
      ...(unavailableNote(g) ? { note: unavailableNote(g) } : {}),
    });
  }
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

/** detsim comparisons that have no figure because detsim itself failed (never a peer's fault). */
export function detsimFailures(r: PeersReport): { comparison: string; reason: string }[] {
  const out: { comparison: string; reason: string }[] = [];
  for (const row of r.lockstep.rows)
    if (row.detsim.status === 'unavailable') out.push({ comparison: `gymnasium.n${row.n}`, reason: row.detsim.reason });
  if (r.checkpoint.detsim.status === 'unavailable')
    out.push({ comparison: 'safetensors', reason: r.checkpoint.detsim.reason });
  return out;
}

export const peers: BenchSuite = {
  name: 'peers',
  description:
    'detsim beside its peers in the same run: walker/forage vs Gymnasium AsyncVectorEnv (N = 1, 4, 16); 256 MiB durable commit and restore vs safetensors save/load (peers from bench/.venv, pinned in bench/peers/requirements.txt)',
  async run(ctx) {
    const report = await runPeers({ quick: ctx.quick, scratch: ctx.tmpDir, log: (l) => ctx.log(l) });
    ctx.log(peersTable(report));
    const gap = largestGap(report);
    return {
      figures: peersFigures(report),
      details: { peers: report.peers, detsimFailures: detsimFailures(report), largestGap: gap, report },
    };
  },
};
