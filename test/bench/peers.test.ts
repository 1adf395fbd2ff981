// The peers bench suite: `npm run bench -- peers --quick` writes a measured receipt in which every
// comparison has a figure or an explicit "peer unavailable: <why>". Checks structure, never figures.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { preparePythonEnv, readPins } from '../../bench/peers/python-env.js';
import { NOT_AVAILABLE, transportPlan, type BenchTransport } from '../../bench/lib/transports.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'detsim-peers-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Fig {
  id: string;
  value: number;
  unit: string;
  limit: { name: string; value: number; unit: string } | null;
  ratio: number | null;
  note?: string;
}
interface PeerStatus {
  peer: string;
  status: string;
  reason?: string;
}

/** Run the quick peers suite into a fresh directory and return its one receipt. */
function quickPeers(env: Record<string, string | undefined>): {
  status: number | null;
  stderr: string;
  receipt: Record<string, any>;
} {
  const out = mkdtempSync(join(scratch, 'out-'));
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', 'peers', '--quick', '--out', out], {
    cwd: root,
    encoding: 'utf8',
    timeout: 150_000,
    env: { ...process.env, ...env },
  });
  const files = readdirSync(out).filter((f) => f.endsWith('.json'));
  expect(files, r.stderr).toHaveLength(1);
  return { status: r.status, stderr: r.stderr, receipt: JSON.parse(readFileSync(join(out, files[0]!), 'utf8')) };
}

const TRANSPORTS: BenchTransport[] = ['unix', 'unix-env-inline', 'thread', 'thread-env-inline', 'inline'];
/** The transports this build runs: each gets a figure beside each Gymnasium vector env; the others a skip. */
const RUNNABLE = TRANSPORTS.filter((t) => transportPlan(t).available);
const GYM_FIGURES = RUNNABLE.flatMap((t) => [`gymnasium.n1.${t}`, `gymnasium-sync.n1.${t}`]);
const PEER_FIGURES: Record<string, string[]> = {
  gymnasium: GYM_FIGURES,
  safetensors: ['safetensors.save', 'safetensors.load'],
};

/** The structure every peers receipt must have, whichever peers were available. */
function checkReceipt(receipt: Record<string, any>): { figures: Fig[]; peers: PeerStatus[] } {
  expect(receipt.evidence_class).toBe('measured');
  expect(receipt.measure_source).toMatch(/^node --import tsx bench\/run\.ts peers --quick --out /);
  expect(Number.isNaN(Date.parse(receipt.measure_ts))).toBe(false);
  for (const key of ['cpuModel', 'cores', 'memoryBytes', 'node', 'os']) expect(receipt.machine).toHaveProperty(key);
  expect(receipt.quick).toBe(true);
  expect(receipt.suites.map((s: { name: string }) => s.name)).toEqual(['peers']);
  const suite = receipt.suites[0];
  const figures = suite.figures as Fig[];
  const peers = suite.details.peers as PeerStatus[];
  // detsim's own side is always measured: a broken detsim is a failure, not an unavailable peer.
  expect(suite.details.detsimFailures).toEqual([]);
  expect(figures.map((f) => f.id)).toEqual([...GYM_FIGURES, 'safetensors.save', 'safetensors.load']);
  expect(RUNNABLE).toContain('unix');
  // A transport this build lacks is a worded skip, never a failure and never a figure.
  const skipped = suite.details.skippedRows as { comparison: string; reason: string }[];
  expect(skipped.map((s) => s.comparison)).toEqual(
    TRANSPORTS.filter((t) => !RUNNABLE.includes(t)).map((t) => `gymnasium.n1.${t}`),
  );
  for (const s of skipped) expect(s.reason.startsWith(NOT_AVAILABLE)).toBe(true);
  expect(peers.map((p) => p.peer)).toEqual(['gymnasium', 'safetensors']);
  for (const f of figures) {
    expect(Number.isFinite(f.value) && f.value > 0).toBe(true);
    expect(['steps/s', 'MB/s']).toContain(f.unit);
  }
  for (const p of peers) {
    const own = figures.filter((f) => PEER_FIGURES[p.peer]!.includes(f.id));
    if (p.status === 'measured') {
      expect(p.reason).toBeUndefined();
      for (const f of own) {
        expect(f.limit).not.toBeNull();
        expect(f.limit!.unit).toBe(f.unit);
        expect(f.ratio).toBeCloseTo(f.value / f.limit!.value, 9);
        expect(f.note).toBeUndefined();
      }
    } else {
      expect(p.status).toBe('unavailable');
      expect(p.reason).toMatch(/^peer unavailable: \S/);
      for (const f of own) {
        expect(f.limit).toBeNull();
        expect(f.ratio).toBeNull();
        expect(f.note).toBe(p.reason);
      }
    }
  }
  return { figures, peers };
}

describe('peers bench suite (--quick)', () => {
  it('without a Python environment: exits 0, detsim figures measured, each peer unavailable with the reason', () => {
    const venv = join(scratch, 'no-venv');
    const { status, stderr, receipt } = quickPeers({ DETSIM_PEERS_VENV: venv });
    expect(stderr).not.toMatch(/\n\s+at /);
    expect(status).toBe(0);
    expect(existsSync(venv)).toBe(false); // --quick never installs
    const { peers } = checkReceipt(receipt);
    for (const p of peers) {
      expect(p.status).toBe('unavailable');
      expect(p.reason).toContain('is absent and --quick does not install it');
    }
  });

  const venv = join(root, 'bench', '.venv');
  it.skipIf(!existsSync(join(venv, 'bin', 'python')))(
    'with bench/.venv (made by a full bench run): every peer has a figure or a reason',
    () => {
      const { status, receipt } = quickPeers({ DETSIM_PEERS_VENV: undefined });
      expect(status).toBe(0);
      checkReceipt(receipt);
    },
  );
  if (!existsSync(join(venv, 'bin', 'python')))
    console.log(
      'peers.test: bench/.venv absent (no full `npm run bench -- peers` on this machine): the with-venv case is skipped',
    );
});

describe('peers Python environment probe', () => {
  it('a venv whose interpreter cannot import the peers makes each one unavailable, naming the failure', async () => {
    const venv = join(scratch, 'broken-venv');
    mkdirSync(join(venv, 'bin'), { recursive: true });
    writeFileSync(
      join(venv, 'bin', 'python'),
      '#!/bin/sh\necho "ModuleNotFoundError: No module named gymnasium" >&2\nexit 1\n',
    );
    chmodSync(join(venv, 'bin', 'python'), 0o755);
    const env = await preparePythonEnv({ quick: true, modules: ['gymnasium', 'safetensors'], venvDir: venv });
    expect(env.setup).toBe('existing');
    for (const m of ['gymnasium', 'safetensors']) {
      const probe = env.modules[m]!;
      expect('unavailable' in probe && probe.unavailable).toMatch(
        /exited 1: ModuleNotFoundError: No module named gymnasium/,
      );
    }
  });

  it('requirements.txt pins every peer package exactly', () => {
    const pins = readPins();
    for (const name of ['gymnasium', 'numpy', 'safetensors']) expect(pins[name]).toMatch(/^\d+\.\d+(\.\d+)?$/);
  });
});
