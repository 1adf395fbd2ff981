// The peers comparison: detsim on each transport beside Gymnasium AsyncVectorEnv and SyncVectorEnv
// (steps/s at N = 1, 4, 16) and beside safetensors (256 MiB save+fsync, load+verify), measured in
// one process run, with ratios detsim ÷ peer. NOT the harness (bench/run.ts writes the receipt)
// and never a made-up figure.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  measureDetsimCheckpoint,
  summarize,
  type DetsimCheckpointFigures,
  type TimingSummary,
} from './detsim-checkpoint.js';
import { measureDetsimLockstep, type DetsimLockstepFigures, type LockstepCase } from './detsim-lockstep.js';
import { preparePythonEnv, runPeerScript, type ModuleProbe, type PythonEnv } from './python-env.js';
import { transportPlan, type BenchTransport } from '../lib/transports.js';

/** A measured figure, or the reason there is none. */
export type Figure<T> = ({ status: 'measured' } & T) | { status: 'unavailable'; reason: string };

/** AsyncVectorEnv: one subprocess per env; SyncVectorEnv: every env in the stepping process. */
export type GymVector = 'async' | 'sync';

export interface GymFigures {
  n: number;
  vector: GymVector;
  /** Env subprocesses (N for async, 0 for sync). */
  processes: number;
  steps: number;
  warmupSteps: number;
  seconds: number;
  envStepsPerSec: number;
  versions: Record<string, string>;
}

export interface SafetensorsFigures {
  stateBytes: number;
  fileBytes: number;
  versions: Record<string, string>;
  save: TimingSummary;
  loadVerify: TimingSummary;
}

/** detsim's side of a row: measured, failed ('unavailable' — always detsim's fault), or skipped
 * because this build lacks the transport (bench/lib/transports.ts). */
export type DetsimOutcome = Figure<DetsimLockstepFigures> | { status: 'skipped'; reason: string };

/** One N on one detsim transport; the Gymnasium figures are measured once per N and shared. */
export interface LockstepRow {
  n: number;
  transport: BenchTransport;
  detsim: DetsimOutcome;
  /** AsyncVectorEnv, N subprocess copies: the issue's reference peer. */
  gymnasium: Figure<GymFigures>;
  /** SyncVectorEnv, N copies stepped in one process. */
  gymnasiumSync: Figure<GymFigures>;
  /** detsim agent-steps/s ÷ AsyncVectorEnv env-steps/s; null when either side has no figure. */
  ratio: number | null;
  /** detsim agent-steps/s ÷ SyncVectorEnv env-steps/s; null when either side has no figure. */
  ratioSync: number | null;
}

export interface CheckpointRow {
  operation: 'save+fsync' | 'load+verify';
  detsimMBps: number | null;
  safetensorsMBps: number | null;
  /** detsim MB/s ÷ safetensors MB/s (time ratio inverted: > 1 means detsim is faster). */
  ratio: number | null;
}

export interface PeerStatus {
  peer: 'gymnasium' | 'safetensors';
  status: 'measured' | 'unavailable';
  reason?: string;
}

export interface PeersReport {
  quick: boolean;
  /** 1/5/15-minute load averages before and after: the machine is shared, so say how busy it was. */
  loadAverage: { before: number[]; after: number[] };
  python: {
    setup: PythonEnv['setup'];
    interpreter: string | null;
    notes: string[];
    modules: Record<string, ModuleProbe>;
  };
  lockstep: {
    sizes: number[];
    transports: BenchTransport[];
    steps: number;
    warmupSteps: number;
    width: number;
    height: number;
    food: number;
    rows: LockstepRow[];
  };
  checkpoint: {
    stateBytes: number;
    repeats: number;
    dir: string;
    detsim: Figure<DetsimCheckpointFigures>;
    safetensors: Figure<SafetensorsFigures>;
    rows: CheckpointRow[];
  };
  peers: PeerStatus[];
}

export interface PeersSizes {
  sizes: number[];
  /** The detsim transports measured at every size (skipped with the reason where this build lacks one). */
  transports: BenchTransport[];
  steps: number;
  warmupSteps: number;
  stateBytes: number;
  repeats: number;
}

export const FULL_SIZES: PeersSizes = {
  sizes: [1, 4, 16],
  transports: ['unix', 'unix-env-inline', 'thread', 'thread-env-inline', 'inline'],
  steps: 3000,
  warmupSteps: 200,
  stateBytes: 256 * 1024 * 1024,
  repeats: 5,
};
export const QUICK_SIZES: PeersSizes = {
  sizes: [1],
  transports: ['unix', 'unix-env-inline', 'thread', 'thread-env-inline', 'inline'],
  steps: 40,
  warmupSteps: 10,
  stateBytes: 1024 * 1024,
  repeats: 1,
};
/** The world both sides step: forage-v1 parameters (the Python peer mirrors its rules). */
const TORUS = { width: 32, height: 32, food: 16 };

export interface PeersOptions {
  quick: boolean;
  /** Scratch parent directory (the harness's tmpDir); default the OS temp directory. */
  scratch?: string;
  /** The detsim lockstep measurement; default a real runSession (detsim-lockstep.ts). */
  measureDetsimLockstep?: (c: LockstepCase) => Promise<DetsimLockstepFigures>;
  sizes?: PeersSizes;
  log?: (line: string) => void;
}

function errorText(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return text.split('\n')[0]!.slice(0, 500);
}

async function attempt<T>(fn: () => Promise<T>): Promise<Figure<T>> {
  try {
    return { status: 'measured', ...(await fn()) };
  } catch (e) {
    return { status: 'unavailable', reason: errorText(e) };
  }
}

function unavailableReason(modules: Record<string, ModuleProbe>, names: readonly string[]): string | null {
  for (const n of names) {
    const p = modules[n];
    if (!p) return `${n} was not probed`;
    if ('unavailable' in p) return p.unavailable;
  }
  return null;
}

function ratioOf(a: number | null, b: number | null): number | null {
  return a === null || b === null || !(b > 0) ? null : a / b;
}

/** Both vector envs at N in one script run (AsyncVectorEnv first, then SyncVectorEnv). */
async function gymFigures(python: string, c: LockstepCase): Promise<Record<GymVector, GymFigures>> {
  const args = [
    '--n',
    String(c.n),
    '--vector',
    'async',
    '--vector',
    'sync',
    '--steps',
    String(c.steps),
    '--warmup',
    String(c.warmupSteps),
    '--width',
    String(c.width),
    '--height',
    String(c.height),
    '--food',
    String(c.food),
  ];
  const r = await runPeerScript(python, 'gym_walk.py', args, 10 * 60_000);
  if (!r.ok) throw new Error(r.reason);
  const out = r.value as { versions: Record<string, string>; results: Omit<GymFigures, 'versions'>[] };
  const pick = (vector: GymVector): GymFigures => {
    const row = out.results.find((x) => x.n === c.n && x.vector === vector);
    if (!row || !(row.envStepsPerSec > 0)) throw new Error(`gym_walk.py reported no ${vector} figure for N=${c.n}`);
    return { ...row, versions: out.versions };
  };
  return { async: pick('async'), sync: pick('sync') };
}

async function safetensorsFigures(
  python: string,
  stateBytes: number,
  dir: string,
  repeats: number,
): Promise<SafetensorsFigures> {
  const r = await runPeerScript(
    python,
    'safetensors_io.py',
    ['--bytes', String(stateBytes), '--dir', dir, '--repeats', String(repeats)],
    10 * 60_000,
  );
  if (!r.ok) throw new Error(r.reason);
  const out = r.value as SafetensorsFigures;
  if (!(out.save?.mbPerSec > 0) || !(out.loadVerify?.mbPerSec > 0))
    throw new Error('safetensors_io.py reported no figure');
  return {
    stateBytes: out.stateBytes,
    fileBytes: out.fileBytes,
    versions: out.versions,
    save: out.save,
    loadVerify: out.loadVerify,
  };
}

function merged(a: TimingSummary, b: TimingSummary, bytes: number): TimingSummary {
  return summarize([...a.samples, ...b.samples], bytes);
}

/** One figure from repeated single runs: the first failure wins, otherwise the samples are pooled. */
function mergeRuns<T>(
  runs: readonly Figure<T>[],
  join2: (a: T & { status: 'measured' }, b: T & { status: 'measured' }) => T & { status: 'measured' },
): Figure<T> {
  const failed = runs.find((r) => r.status === 'unavailable');
  if (failed) return failed;
  const ok = runs as (T & { status: 'measured' })[];
  if (ok.length === 0) return { status: 'unavailable', reason: 'no repeat ran' };
  return ok.slice(1).reduce(join2, ok[0]!);
}

function peerStatus(peer: PeerStatus['peer'], figures: readonly Figure<unknown>[]): PeerStatus {
  const missing = figures.find((f) => f.status === 'unavailable') as { reason: string } | undefined;
  return missing
    ? { peer, status: 'unavailable', reason: `peer unavailable: ${missing.reason}` }
    : { peer, status: 'measured' };
}

/** Run the whole comparison. Each N runs detsim then its peer back to back, so both see the same machine. */
export async function runPeers(opts: PeersOptions): Promise<PeersReport> {
  const sizes = opts.sizes ?? (opts.quick ? QUICK_SIZES : FULL_SIZES);
  const log = opts.log ?? (() => undefined);
  const scratch = opts.scratch ?? tmpdir();
  const detsimLockstep = opts.measureDetsimLockstep ?? ((c: LockstepCase) => measureDetsimLockstep(c, scratch, log));
  const loadBefore = loadavg();
  const env = await preparePythonEnv({ quick: opts.quick, modules: ['gymnasium', 'numpy', 'safetensors'] });
  env.notes.forEach((n) => log(`peers: ${n}`));
  const gymMissing =
    env.python === null
      ? (env.notes.at(-1) ?? 'no Python environment')
      : unavailableReason(env.modules, ['gymnasium', 'numpy']);
  const stMissing =
    env.python === null
      ? (env.notes.at(-1) ?? 'no Python environment')
      : unavailableReason(env.modules, ['safetensors', 'numpy']);

  const rows: LockstepRow[] = [];
  for (const n of sizes.sizes) {
    // No agentsPerWorker: detsim's default layout, as a researcher gets it (AsyncVectorEnv: its
    // default too, a process per env).
    const c = (transport: BenchTransport): LockstepCase => ({
      n,
      transport,
      steps: sizes.steps,
      warmupSteps: sizes.warmupSteps,
      ...TORUS,
    });
    const detsim = new Map<BenchTransport, DetsimOutcome>();
    for (const transport of sizes.transports) {
      const t = transportPlan(transport);
      log(`peers: lockstep N=${n}: detsim walker/forage, ${transport}${t.available ? '' : `: skipped, ${t.reason}`}`);
      detsim.set(
        transport,
        t.available ? await attempt(() => detsimLockstep(c(transport))) : { status: 'skipped', reason: t.reason },
      );
    }
    log(`peers: lockstep N=${n}: gymnasium AsyncVectorEnv, SyncVectorEnv`);
    const gym: Figure<Record<GymVector, GymFigures>> =
      gymMissing !== null
        ? { status: 'unavailable', reason: gymMissing }
        : await attempt(() => gymFigures(env.python!, c('unix')));
    const gymnasium: Figure<GymFigures> = gym.status === 'measured' ? { status: 'measured', ...gym.async } : gym;
    const gymnasiumSync: Figure<GymFigures> = gym.status === 'measured' ? { status: 'measured', ...gym.sync } : gym;
    for (const [transport, d] of detsim) {
      const mine = d.status === 'measured' ? d.agentStepsPerSec : null;
      const rate = (g: Figure<GymFigures>): number | null => (g.status === 'measured' ? g.envStepsPerSec : null);
      rows.push({
        n,
        transport,
        detsim: d,
        gymnasium,
        gymnasiumSync,
        ratio: ratioOf(mine, rate(gymnasium)),
        ratioSync: ratioOf(mine, rate(gymnasiumSync)),
      });
    }
  }

  // Both sides write into one fresh directory on the same filesystem, alternating one repeat of
  // each, so a neighbour's load burst hits both sides rather than one.
  const dir = mkdtempSync(join(scratch, 'peers-checkpoint-'));
  const detsimRuns: Figure<DetsimCheckpointFigures>[] = [];
  const stRuns: Figure<SafetensorsFigures>[] = [];
  try {
    for (let rep = 1; rep <= sizes.repeats; rep++) {
      log(
        `peers: checkpoint ${sizes.stateBytes} bytes, repeat ${rep}/${sizes.repeats}: detsim durable commit + restore`,
      );
      detsimRuns.push(await attempt(() => measureDetsimCheckpoint({ stateBytes: sizes.stateBytes, dir, repeats: 1 })));
      log(
        `peers: checkpoint ${sizes.stateBytes} bytes, repeat ${rep}/${sizes.repeats}: safetensors save_file + fsync, load_file + SHA-256`,
      );
      stRuns.push(
        stMissing !== null
          ? { status: 'unavailable', reason: stMissing }
          : await attempt(() => safetensorsFigures(env.python!, sizes.stateBytes, dir, 1)),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const detsimCk = mergeRuns(detsimRuns, (a, b) => ({
    ...a,
    save: merged(a.save, b.save, sizes.stateBytes),
    restoreVerify: merged(a.restoreVerify, b.restoreVerify, sizes.stateBytes),
  }));
  const stCk = mergeRuns(stRuns, (a, b) => ({
    ...a,
    save: merged(a.save, b.save, sizes.stateBytes),
    loadVerify: merged(a.loadVerify, b.loadVerify, sizes.stateBytes),
  }));
  const d = detsimCk.status === 'measured' ? detsimCk : null;
  const s = stCk.status === 'measured' ? stCk : null;
  const ckRows: CheckpointRow[] = [
    {
      operation: 'save+fsync',
      detsimMBps: d?.save.mbPerSec ?? null,
      safetensorsMBps: s?.save.mbPerSec ?? null,
      ratio: null,
    },
    {
      operation: 'load+verify',
      detsimMBps: d?.restoreVerify.mbPerSec ?? null,
      safetensorsMBps: s?.loadVerify.mbPerSec ?? null,
      ratio: null,
    },
  ].map((r) => ({ ...r, ratio: ratioOf(r.detsimMBps, r.safetensorsMBps) }) as CheckpointRow);

  return {
    quick: opts.quick,
    loadAverage: { before: loadBefore, after: loadavg() },
    python: { setup: env.setup, interpreter: env.python, notes: env.notes, modules: env.modules },
    lockstep: {
      sizes: sizes.sizes,
      transports: sizes.transports,
      steps: sizes.steps,
      warmupSteps: sizes.warmupSteps,
      ...TORUS,
      rows,
    },
    checkpoint: {
      stateBytes: sizes.stateBytes,
      repeats: sizes.repeats,
      dir,
      detsim: detsimCk,
      safetensors: stCk,
      rows: ckRows,
    },
    peers: [
      peerStatus(
        'gymnasium',
        rows.flatMap((r) => [r.gymnasium, r.gymnasiumSync]),
      ),
      peerStatus('safetensors', [stCk]),
    ],
  };
}
