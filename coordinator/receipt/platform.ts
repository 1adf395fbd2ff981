// The platform fingerprint a receipt carries (`platformFingerprint`, physical: never in the
// ReproHash): the OS and kernel, the CPU model and the instruction-set flags that can matter to
// numerics or crypto, the coordinator's Node (version, V8, its flag set), detsim's version and git
// commit, and each worker's Hello runtime and build digest (with the Rust and Python versions they
// name). Collected once per process from what is already at hand (no process spawned, nothing
// wall-clock or random); and compared field by field for `detsim diff`. It is NOT the field table
// (fields.ts) nor the receipt (receipt.ts), and it judges nothing: two fingerprints that differ
// say where two runs ran, not whether they agree.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { arch, cpus, machine, platform, release, type, version } from 'node:os';
import { join, resolve } from 'node:path';
import { canonicalize } from '../../core/formats/canonical-json.js';

/** The format id of a platform fingerprint. */
export const PLATFORM_FORMAT = 'detsim-platform-v1';

/** One worker as its Hello reply introduced it. */
export interface WorkerFingerprint {
  workerId: string;
  role: string;
  /** Hello `runtime`: "detsim-ts/<node version>", "detsim-rs/<version> rustc/<rustc version>", "detsim-py/<python version>". */
  runtime: string;
  /** Hello `buildDigest`: the worker implementation's identity. */
  buildDigest: string;
}

/** receipt.json `platformFingerprint`: where and with what a run was made (docs/spec/diff0.md "Platform fingerprint"). */
export interface PlatformFingerprint {
  format: 'detsim-platform-v1';
  os: { platform: string; type: string; release: string; version: string; arch: string; machine: string };
  /** `flags`: the relevant ones /proc/cpuinfo lists, sorted; null where there is no /proc/cpuinfo. */
  cpu: { model: string; cores: number; flags: string[] | null };
  /** The coordinator's Node: `execArgv` and `NODE_OPTIONS` are its flag set. */
  node: { version: string; v8: string; execArgv: string[]; nodeOptions: string | null };
  /** package.json's version and the checkout's commit (null: not a git checkout, or unreadable). */
  detsim: { version: string | null; gitCommit: string | null };
  /** The rustc versions the Rust workers were built with (null: no Rust worker ran). */
  rust: string[] | null;
  /** The Python versions the Python workers ran on (null: no Python worker ran). */
  python: string[] | null;
  /** Every worker of the fleet that finished the run, by worker id. */
  workers: WorkerFingerprint[];
}

type HostFingerprint = Pick<PlatformFingerprint, 'os' | 'cpu' | 'node' | 'detsim'>;

/**
 * CPU flags that can change results or speed of numerics and hashing (x86 /proc/cpuinfo `flags`,
 * Arm `Features`). Everything else a CPU lists (virtualisation, power, bug workarounds) is left out.
 */
export const RELEVANT_CPU_FLAGS: readonly string[] = [
  'sse2',
  'ssse3',
  'sse4_1',
  'sse4_2',
  'popcnt',
  'avx',
  'avx2',
  'avx512f',
  'avx512dq',
  'avx512bw',
  'avx512vl',
  'fma',
  'f16c',
  'bmi2',
  'aes',
  'pclmulqdq',
  'sha_ni',
  'fp',
  'asimd',
  'asimdhp',
  'fphp',
  'sve',
  'sve2',
  'pmull',
  'sha1',
  'sha2',
  'sha512',
];

/** The relevant flags of the first processor a /proc/cpuinfo text lists, sorted; null when it lists none. */
export function cpuFlagsOf(cpuinfo: string): string[] | null {
  const line = /^(?:flags|Features)\s*:(.*)$/m.exec(cpuinfo);
  if (line === null) return null;
  const listed = new Set(line[1]!.trim().split(/\s+/));
  return RELEVANT_CPU_FLAGS.filter((f) => listed.has(f)).sort();
}

function readCpuFlags(): string[] | null {
  try {
    return cpuFlagsOf(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return null;
  }
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
}

const COMMIT = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/** `.git` of a checkout (a directory) or of a worktree or submodule (a file `gitdir: <dir>`). */
function gitDirOf(root: string): string | null {
  const dotGit = join(root, '.git');
  if (!existsSync(dotGit)) return null;
  if (statSync(dotGit).isDirectory()) return dotGit;
  const m = /^gitdir:\s*(.+)$/m.exec(readText(dotGit) ?? '');
  return m ? resolve(root, m[1]!.trim()) : null;
}

/** A ref's commit: loose in the worktree's or the common git directory, else in packed-refs. */
function refCommit(gitDir: string, ref: string): string | null {
  const common = resolve(gitDir, readText(join(gitDir, 'commondir')) ?? '.');
  for (const dir of [gitDir, common]) {
    const loose = readText(join(dir, ref));
    if (loose !== null && COMMIT.test(loose)) return loose;
  }
  for (const line of (readText(join(common, 'packed-refs')) ?? '').split('\n')) {
    const [hash, name] = line.split(' ');
    if (name === ref && hash !== undefined && COMMIT.test(hash)) return hash;
  }
  return null;
}

/**
 * The commit HEAD names in `root`'s own `.git` (never a parent directory's: an installed package
 * inside someone's repository is not that repository), read from the files; null when unknown.
 */
export function gitCommitOf(root: string): string | null {
  try {
    const gitDir = gitDirOf(root);
    const head = gitDir === null ? null : readText(join(gitDir, 'HEAD'));
    if (gitDir === null || head === null) return null;
    if (COMMIT.test(head)) return head;
    const ref = /^ref:\s*(\S+)$/.exec(head);
    return ref ? refCommit(gitDir, ref[1]!) : null;
  } catch {
    return null;
  }
}

function packageVersionOf(root: string): string | null {
  try {
    const v = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: unknown }).version;
    return typeof v === 'string' ? v : null;
  } catch {
    return null;
  }
}

const hosts = new Map<string, HostFingerprint>();

/** This machine and this coordinator process, read once per process (per package root). */
export function hostFingerprint(packageRoot: string): HostFingerprint {
  let host = hosts.get(packageRoot);
  if (host === undefined) {
    host = {
      os: {
        platform: platform(),
        type: type(),
        release: release(),
        version: version(),
        arch: arch(),
        machine: machine(),
      },
      cpu: { model: (cpus()[0]?.model ?? 'unknown').trim(), cores: cpus().length, flags: readCpuFlags() },
      node: {
        version: process.version,
        v8: process.versions.v8,
        execArgv: [...process.execArgv],
        nodeOptions: process.env.NODE_OPTIONS ?? null,
      },
      detsim: { version: packageVersionOf(packageRoot), gitCommit: gitCommitOf(packageRoot) },
    };
    hosts.set(packageRoot, host);
  }
  return host;
}

/** Distinct versions the workers' runtimes name for one language, sorted; null when none of them ran. */
function versionsOf(workers: readonly WorkerFingerprint[], prefix: string, version: RegExp): string[] | null {
  const found = workers
    .filter((w) => w.runtime.startsWith(prefix))
    .map((w) => version.exec(w.runtime)?.[1] ?? 'unknown');
  return found.length === 0 ? null : [...new Set(found)].sort();
}

/** The fingerprint of a run finished by `workers` (the fleet's Hello replies) in this process. */
export function platformFingerprint(packageRoot: string, workers: readonly WorkerFingerprint[]): PlatformFingerprint {
  const listed = workers
    .map(({ workerId, role, runtime, buildDigest }) => ({ workerId, role, runtime, buildDigest }))
    .sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0));
  return {
    format: PLATFORM_FORMAT,
    ...hostFingerprint(packageRoot),
    rust: versionsOf(listed, 'detsim-rs/', /\brustc\/(\S+)/),
    python: versionsOf(listed, 'detsim-py/', /^detsim-py\/(\S+)/),
    workers: listed,
  };
}

/** One field two fingerprints disagree on: its path and both values (canonical JSON; absent: "absent"). */
export interface FingerprintDifference {
  readonly path: string;
  readonly left: string;
  readonly right: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const keyedById = (v: unknown): v is Record<string, unknown>[] =>
  Array.isArray(v) && v.length > 0 && v.every((e) => isObject(e) && typeof e.workerId === 'string');

/** Leaves of a fingerprint by path: objects by key, worker lists by worker id, other lists whole. */
function leaves(v: unknown, path: string, out: Map<string, string>): Map<string, string> {
  if (isObject(v)) for (const [k, c] of Object.entries(v)) leaves(c, path === '' ? k : `${path}.${k}`, out);
  else if (keyedById(v))
    for (const e of v) leaves({ ...e, workerId: undefined }, `${path}[${String(e.workerId)}]`, out);
  else if (v !== undefined) out.set(path, canonicalize(v));
  return out;
}

/** Where two fingerprints differ, field by field, in path order (empty: the same machine and software). */
export function fingerprintDifferences(left: unknown, right: unknown): FingerprintDifference[] {
  const a = leaves(left, '', new Map());
  const b = leaves(right, '', new Map());
  const paths = [...new Set([...a.keys(), ...b.keys()])].sort();
  return paths
    .filter((p) => a.get(p) !== b.get(p))
    .map((p) => ({ path: p, left: a.get(p) ?? 'absent', right: b.get(p) ?? 'absent' }));
}

/** What `detsim diff` says about the fingerprints of two runs of one config. */
export interface FingerprintComparison {
  /** True when both runs recorded one and nothing differs. */
  readonly same: boolean;
  readonly differences: readonly FingerprintDifference[];
  /** The run directories that recorded none (no receipt.json, or one from before receipts carried it). */
  readonly missing: readonly string[];
}

/** Compare the fingerprints of two runs (`dirs`: their run directories, in the same order). */
export function compareFingerprints(
  left: unknown,
  right: unknown,
  dirs: readonly [string, string],
): FingerprintComparison {
  const missing = dirs.filter((_, i) => [left, right][i] == null);
  const differences = missing.length > 0 ? [] : fingerprintDifferences(left, right);
  return { same: missing.length === 0 && differences.length === 0, differences, missing };
}

/** A one-line description of a fingerprint: OS, kernel, CPU, Node, detsim and its commit, workers. */
function oneLine(f: Partial<PlatformFingerprint>): string {
  const commit = f.detsim?.gitCommit ? ` (${f.detsim.gitCommit.slice(0, 12)})` : '';
  return [
    `${f.os?.type ?? '?'} ${f.os?.release ?? '?'} ${f.os?.arch ?? '?'}`,
    `${f.cpu?.model ?? '?'} ×${f.cpu?.cores ?? '?'}`,
    `node ${f.node?.version ?? '?'}`,
    `detsim ${f.detsim?.version ?? '?'}${commit}`,
    `${f.workers?.length ?? 0} workers`,
  ].join(', ');
}

/** The lines `detsim diff` prints about two runs' fingerprints: the fields that differ side by side, or that none does. */
export function describeFingerprints(
  c: FingerprintComparison,
  left: unknown,
  dirs: readonly [string, string],
): string[] {
  if (c.missing.length > 0)
    return c.missing.map(
      (d) =>
        `platform: ${d} recorded no platform fingerprint (no receipt.json, or one from before receipts carried it)`,
    );
  if (c.same)
    return [
      `platform: the same fingerprint for both runs (the same machine and software, as far as it records): ${oneLine(left as Partial<PlatformFingerprint>)}`,
    ];
  const width = (xs: string[]) => Math.max(...xs.map((x) => x.length));
  const pathWidth = width(['field', ...c.differences.map((d) => d.path)]);
  const leftWidth = width(['a', ...c.differences.map((d) => d.left)]);
  const n = c.differences.length;
  return [
    `platform: the fingerprints differ in ${n} field${n === 1 ? '' : 's'} (physical: outside the ReproHash); a = ${dirs[0]}, b = ${dirs[1]}`,
    `  ${'field'.padEnd(pathWidth)}  ${'a'.padEnd(leftWidth)}  b`,
    ...c.differences.map((d) => `  ${d.path.padEnd(pathWidth)}  ${d.left.padEnd(leftWidth)}  ${d.right}`),
  ];
}
