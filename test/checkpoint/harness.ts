// Test harness for checkpoint tests: a real fleet (worker processes over gRPC on Unix sockets, or
// with `inline` every worker in this thread: workers.transport inline) initialized in lockstep, a CheckpointGroup with a real store/writer/ledger in a temp run dir.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pino } from 'pino';
import { parseConfigText, resolveConfig, type RunPlan } from '../../coordinator/config.js';
import { CheckpointGroup } from '../../coordinator/checkpoint/group.js';
import {
  openCheckpointing,
  storeDirOf,
  type Checkpointing,
  type CheckpointingOptions,
} from '../../coordinator/checkpoint/checkpointing.js';
import { launchFleet, type Fleet, type WorkerCommand } from '../../coordinator/launch/launcher.js';
import { Lockstep, type Identities } from '../../coordinator/session/lockstep.js';
import { builtWorkersFor } from '../coordinator/helpers.js';

export const logger = pino({ level: 'silent' });

/** Load an example config with edits applied to the parsed object (e.g. fewer neurons, another seed). */
export function planOf(file: string, edit?: (cfg: Record<string, any>) => void): RunPlan {
  const cfg = parseConfigText(readFileSync(file, 'utf8'), file) as Record<string, any>;
  // The harness's fleets are worker processes (its tests kill, wrap and watch them) unless the config says otherwise.
  cfg.workers = { transport: 'unix', ...cfg.workers };
  edit?.(cfg);
  return resolveConfig(cfg, { baseDir: dirname(resolve(file)) });
}

export const LIF = (neurons = 64) =>
  planOf('examples/lif-pair.yaml', (c) => {
    for (const a of c.agents) a.params = { neurons };
  });
export const WALKERS = (count = 6) =>
  planOf('examples/forage-walkers.yaml', (c) => {
    c.agents.count = count;
    c.workers.agentsPerWorker = 3;
  });

export function tmpDir(prefix = 'detsim-ckpt-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface Session {
  plan: RunPlan;
  fleet: Fleet;
  lockstep: Lockstep;
  group: CheckpointGroup;
  ck: Checkpointing;
  runDir: string;
  close(): Promise<void>;
}

/** Launch and (unless `identities` is given: a fresh fleet for a restore) initialize a session. */
export async function startSession(
  planned: RunPlan,
  opts: {
    runDir?: string;
    epoch?: string;
    identities?: Identities;
    checkpointing?: CheckpointingOptions;
    /** Workers without --store-dir: no store-files-v1, every payload streams through the coordinator. */
    streamed?: boolean;
    /** How each built TypeScript worker process is started, given its command (default: as it is). */
    wrapCommand?: (cmd: WorkerCommand) => WorkerCommand;
    /** The longest reply attachment the workers' links receive (LaunchOptions.maxAttachmentBytes). */
    maxAttachmentBytes?: number;
    /** Every worker in this thread (`workers.transport: inline`): for logic that does not depend on processes. */
    inline?: boolean;
  } = {},
): Promise<Session> {
  const plan: RunPlan = opts.inline ? { ...planned, transport: 'inline' } : planned;
  const runDir = opts.runDir ?? tmpDir();
  // Built TypeScript worker processes where they fit (not tsx from source: ~0.5 s of CPU a start).
  const built = builtWorkersFor(plan);
  const wrap = opts.wrapCommand;
  const fleet = await launchFleet(plan, {
    logger,
    commandFor: opts.inline
      ? undefined
      : wrap
        ? (w) => {
            const cmd = built(w);
            return cmd && wrap(cmd);
          }
        : built,
    ...(opts.streamed ? {} : { storeDir: storeDirOf(runDir) }),
    ...(opts.maxAttachmentBytes !== undefined ? { maxAttachmentBytes: opts.maxAttachmentBytes } : {}),
  });
  const lockstep = new Lockstep(plan, fleet, {
    dispatch: 'concurrent',
    epoch: opts.epoch ?? 'e1',
    startedAt: process.hrtime.bigint(),
    logger,
  });
  try {
    if (opts.identities) lockstep.adoptIdentities(opts.identities);
    else await lockstep.initialize();
    const ck = await openCheckpointing(runDir, opts.checkpointing);
    const group = new CheckpointGroup({
      plan,
      fleet,
      lockstep,
      logger,
      writer: ck.writer,
      ledger: ck.ledger,
      baseEpoch: 'e1',
    });
    return {
      plan,
      fleet,
      lockstep,
      group,
      ck,
      runDir,
      close: async () => {
        await ck.writer.drain();
        await fleet.shutdown('run-complete', 1000);
      },
    };
  } catch (e) {
    await fleet.shutdown('run-failed', 500);
    throw e;
  }
}
