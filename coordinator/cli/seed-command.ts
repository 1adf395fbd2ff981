// `detsim seed`: print the seed-derivation-v1 seeds of a composition. Only formatting and
// argument handling live here; the algorithm is formats/seed.ts.
import type { Command } from 'commander';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { collisionWarning, deriveSeeds } from '../../core/formats/seed.js';
import { action, writeStdout } from './common.js';

export function registerSeed(program: Command): void {
  program
    .command('seed')
    .description('derive per-agent seeds (seed-derivation-v1) from a master seed')
    .requiredOption('--master <u64>', 'master seed, a U64 in canonical decimal')
    .requiredOption('--agents <ids>', 'comma-separated agent ids, in order')
    .option('--json', 'print one canonical JSON object')
    .action(
      action((opts: { master: string; agents: string; json?: boolean }) => {
        const ids = opts.agents.split(',');
        const derived = deriveSeeds(opts.master, ids);
        for (const c of derived.collisions) process.stderr.write(`${collisionWarning(c)}\n`);
        if (opts.json) {
          writeStdout(
            canonicalize({ algorithm: derived.algorithm, masterSeed: derived.masterSeed, seeds: derived.seeds }),
          );
        } else {
          writeStdout(`${derived.algorithm} master seed ${derived.masterSeed}`);
          for (const s of derived.seeds) writeStdout(`${s.agentId}\t${s.seed}`);
        }
      }),
    );
}
