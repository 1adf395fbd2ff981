// Multi-host on one machine: two network namespaces, each joined to this (the coordinator's) one by a
// veth pair with addresses from 10.100.0.0/10 (a /24 per test pid, so parallel runs never clash),
// host the workers of examples/forage-walkers.yaml, started by hand with `ip netns exec … detsim
// worker --listen <its veth address> --tls-dir … --rendezvous DIR`; the coordinator finds them
// through the rendezvous directory, checks the certificate each presents against its record,
// reaches them over TCP with mutual TLS and the run's bearer token (a `detsim certs` set whose
// worker certificate names both veth addresses), and the run has the golden ReproHash.
// Namespaces and veths are removed even on failure. Skips (saying why) only when not root or without `ip`.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../coordinator/config.js';
import { runSession } from '../../coordinator/session/run.js';
import { certificateFingerprint, readRendezvousRecord } from '../../core/protocol/index.js';
import { CLI_MAIN } from '../cli-refusal.js';
import { REPO_ROOT } from '../workers/harness.js';
import { rendezvousConfig, startHandWorker, stopAll, type HandWorker } from './hand-workers.js';

/** Why this test cannot run here, or null. */
function netnsSkip(): string | null {
  if (process.getuid?.() !== 0) return 'network-namespace rendezvous test skipped: needs root (ip netns add)';
  const ip = spawnSync('ip', ['-V'], { encoding: 'utf8' });
  if (ip.error) return 'network-namespace rendezvous test skipped: `ip` (Debian iproute2) is not installed';
  return null;
}
const skip = netnsSkip();
if (skip) console.warn(skip);

/** One simulated host: a namespace and the veth pair that joins it to the coordinator's namespace. */
interface Host {
  ns: string;
  hostIf: string;
  nsIf: string;
  hostIp: string;
  nsIp: string;
}

/** Names and addresses unique to this test process (interface names stay under 16 bytes). */
function hostsFor(pid: number): Host[] {
  const n = pid % 16_000;
  const net = `10.${100 + Math.floor(n / 250)}.${n % 250}`;
  return ['a', 'b'].map((side, i) => ({
    ns: `detsim-rv-${pid}-${side}`,
    hostIf: `rv${pid}${side}0`,
    nsIf: `rv${pid}${side}1`,
    hostIp: `${net}.${4 * i + 1}`,
    nsIp: `${net}.${4 * i + 2}`,
  }));
}

function ip(...args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')} failed: ${r.stderr.trim()}`);
}

const created: Host[] = [];

function createHost(h: Host): void {
  created.push(h);
  ip('netns', 'add', h.ns);
  ip('link', 'add', h.hostIf, 'type', 'veth', 'peer', 'name', h.nsIf);
  ip('link', 'set', h.nsIf, 'netns', h.ns);
  ip('addr', 'add', `${h.hostIp}/30`, 'dev', h.hostIf);
  ip('link', 'set', h.hostIf, 'up');
  ip('-n', h.ns, 'addr', 'add', `${h.nsIp}/30`, 'dev', h.nsIf);
  ip('-n', h.ns, 'link', 'set', h.nsIf, 'up');
  ip('-n', h.ns, 'link', 'set', 'lo', 'up');
}

/** Remove every namespace and veth this test made; what is already gone is fine. */
function removeHosts(): void {
  for (const h of created.splice(0)) {
    spawnSync('ip', ['netns', 'del', h.ns]);
    spawnSync('ip', ['link', 'del', h.hostIf]);
  }
}

afterAll(async () => {
  await stopAll();
  removeHosts();
});

/** Where each worker of forage-walkers runs: its host and its (namespace-local) port. */
const PLACEMENT = [
  { workerId: 'worker-env', role: 'environment', host: 0, port: 7100 },
  { workerId: 'worker-0', role: 'agent', host: 0, port: 7101 },
  { workerId: 'worker-1', role: 'agent', host: 0, port: 7102 },
  { workerId: 'worker-2', role: 'agent', host: 1, port: 7103 },
  { workerId: 'worker-3', role: 'agent', host: 1, port: 7104 },
] as const;

describe('rendezvous across network namespaces', () => {
  it.skipIf(skip !== null)(
    'forage-walkers on workers in two namespaces, found by rendezvous over TCP, has the golden ReproHash',
    async () => {
      const hosts = hostsFor(process.pid);
      const dir = mkdtempSync(join(tmpdir(), 'ds-rv-netns-'));
      try {
        for (const h of hosts) createHost(h);
        const tlsDir = join(dir, 'tls');
        const certs = spawnSync(
          process.execPath,
          [CLI_MAIN, 'certs', tlsDir, ...hosts.flatMap((h) => ['--host', h.nsIp])],
          { cwd: REPO_ROOT, encoding: 'utf8' },
        );
        expect(certs.status, certs.stderr).toBe(0);
        const workers: HandWorker[] = PLACEMENT.map((p) =>
          startHandWorker({
            workerId: p.workerId,
            role: p.role,
            rendezvous: dir,
            listen: `${hosts[p.host]!.nsIp}:${p.port}`,
            extra: ['--tls-dir', tlsDir],
            prefix: ['ip', 'netns', 'exec', hosts[p.host]!.ns],
          }),
        );
        await Promise.all(workers.map((w) => w.ready));
        const pinned = certificateFingerprint(readFileSync(join(tlsDir, 'worker.pem')));
        for (const p of PLACEMENT) {
          const record = readRendezvousRecord(readFileSync(join(dir, `${p.workerId}.json`)), p.workerId);
          expect(record.certificateFingerprint).toBe(pinned);
        }
        const cfg = rendezvousConfig('examples/forage-walkers.yaml', dir, 60);
        const plan = resolveConfig(
          { ...cfg, workers: { ...cfg.workers, tls: { dir: tlsDir } } },
          { baseDir: REPO_ROOT },
        );
        const golden = JSON.parse(readFileSync(join(REPO_ROOT, 'fixtures/golden/forage-walkers.json'), 'utf8'));
        const out = mkdtempSync(join(tmpdir(), 'ds-rv-netns-out-'));
        const result = await runSession(plan, { outDir: out, steps: golden.steps, logLevel: 'info' });
        expect(result.reproHash).toBe(golden.reproHash);
        // The coordinator reached each worker at its namespace's veth address (over mutual TLS).
        const ready = readFileSync(join(result.runDir, 'run.log'), 'utf8')
          .split('\n')
          .filter((l) => l.includes('"worker ready"'))
          .map((l) => JSON.parse(l) as { workerId: string; listen: string });
        const expected = PLACEMENT.map((p) => [p.workerId, `${hosts[p.host]!.nsIp}:${p.port}`]);
        expect(Object.fromEntries(ready.map((r) => [r.workerId, r.listen]))).toEqual(Object.fromEntries(expected));
        // Started by hand, never killed: each left on the coordinator's Shutdown.
        expect(await Promise.all(workers.map((w) => w.exited))).toEqual(PLACEMENT.map(() => 0));
      } finally {
        await stopAll();
        removeHosts();
      }
      expect(spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout).not.toContain(
        `detsim-rv-${process.pid}-`,
      );
    },
  );
});
