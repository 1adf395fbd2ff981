// TLS runs and `detsim certs` through the built CLI (issue 15 §1): TLS is physical — a forage-walkers
// run over tcp with mutual TLS and the bearer token reproduces the golden ReproHash of the plaintext
// run, and so does mixed-walkers with its Rust agent worker; no key or token reaches the run directory;
// a TLS run that cannot work is refused before anything starts (one named line, exit 2, no run
// directory), and so is a launched worker with another CA's certificate (its run directory removed),
// a set mixed from two and an expired set; no DEP0123 warning (the TLS server name is never an IP address);
// `detsim certs` writes the set with
// private modes and refuses to overwrite, naming the files.
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, resolveConfig } from '../../coordinator/config.js';
import { defaultWorkerCommand, launchFleet } from '../../coordinator/launch/launcher.js';
import { isRunFailure } from '../../coordinator/session/run-failure.js';
import { runSession } from '../../coordinator/session/run.js';
import { WorkerCallError, WorkerClient } from '../../core/protocol/index.js';
import { DetsimError } from '../../core/formats/errors.js';
import { DEFAULT_GOLDEN_DIR, readGolden } from '../../coordinator/diff0/goldens.js';
import { CLI_MAIN, detsimCli, expectCliRefusal } from '../cli-refusal.js';
import { REPO_ROOT } from '../workers/harness.js';
import { snapshotDir } from '../dir-snapshot.js';
import { makeExpiredTlsSet } from '../expired-tls-set.js';
import { ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';

const root = mkdtempSync(join(tmpdir(), 'detsim-tls-run-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const FILES = ['ca.pem', 'coordinator.pem', 'coordinator-key.pem', 'worker.pem', 'worker-key.pem', 'token'];

/** Every file under `dir`, as text (but `skip`). */
function allText(dir: string, skip = ''): string {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name !== skip)
    .map((e) => readFileSync(join(e.parentPath, e.name), 'latin1'))
    .join('\n');
}

/** Another run's set (made once): its CA, its worker pair. */
function otherCerts(): string {
  const other = join(root, 'other-certs');
  if (!existsSync(other)) expect(detsimCli(['certs', other]).status).toBe(0);
  return other;
}

describe('detsim certs', () => {
  it('writes the set: keys and token 0600 in a 0700 directory, worker SANs with every --host, no CA key', () => {
    const dir = join(root, 'set');
    const r = detsimCli(['certs', dir, '--host', '10.1.2.3', '--host', 'node7.cluster']);
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(r.stdout).toBe(`${FILES.join('\n')}\n`);
    expect(readdirSync(dir).sort()).toEqual([...FILES].sort());
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const secret of ['coordinator-key.pem', 'worker-key.pem', 'token'])
      expect(statSync(join(dir, secret)).mode & 0o777, secret).toBe(0o600);
    const worker = new X509Certificate(readFileSync(join(dir, 'worker.pem')));
    expect(worker.subjectAltName).toBe(
      'DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, IP Address:10.1.2.3, DNS:node7.cluster',
    );
    const ca = new X509Certificate(readFileSync(join(dir, 'ca.pem')));
    expect(worker.verify(ca.publicKey)).toBe(true);
    expect(new X509Certificate(readFileSync(join(dir, 'coordinator.pem'))).verify(ca.publicKey)).toBe(true);
    expect(readFileSync(join(dir, 'token'), 'utf8')).toMatch(/^[0-9a-f]{64}\n$/);
  });

  it('refuses to overwrite: names the files already there, exit 2, changes nothing', () => {
    const dir = join(root, 'partial');
    mkdirSync(dir, { mode: 0o700 });
    expect(detsimCli(['certs', dir]).status).toBe(0);
    unlinkSync(join(dir, 'ca.pem'));
    const before = snapshotDir(dir);
    const line = expectCliRefusal(detsimCli(['certs', dir]), 'perm_certs_target', dir);
    expect(line).toBe(
      `detsim: [perm_certs_target] ${dir} already holds coordinator.pem, coordinator-key.pem, worker.pem, worker-key.pem, token; detsim certs never overwrites (use an empty directory)`,
    );
    expect(snapshotDir(dir)).toEqual(before);
  });

  it("a certs run killed midway (SIGTERM or SIGKILL) leaves no CA key: the next run sweeps the dead run's staging", async () => {
    const stagingLeft = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('.certs-staging-'));
    for (const [signal, delayMs] of [
      ['SIGTERM', 60],
      ['SIGKILL', 60],
      ['SIGKILL', 150],
    ] as const) {
      const dir = join(root, `killed-${signal}-${delayMs}`);
      const child = spawn(process.execPath, [join(REPO_ROOT, CLI_MAIN), 'certs', dir], { stdio: 'ignore' });
      const exited = new Promise((r) => child.once('exit', r));
      await new Promise((r) => setTimeout(r, delayMs));
      child.kill(signal);
      await exited;
      // SIGTERM: detsim outlives openssl's end and removes its staging itself.
      if (signal === 'SIGTERM' && existsSync(dir)) expect(stagingLeft(dir)).toEqual([]);
      if (existsSync(dir) && existsSync(join(dir, 'ca.pem'))) continue; // it finished before the signal
      // A later run in the same directory removes what a killed one left (its pid is gone).
      expect(detsimCli(['certs', dir]).status).toBe(0);
      expect(stagingLeft(dir)).toEqual([]);
      expect(readdirSync(dir).sort()).toEqual([...FILES].sort());
    }
  }, 60_000);

  it('refuses a target on a kernel filesystem at once (a recursive mkdir under /proc never returns)', () => {
    const r = detsimCli(['certs', '/proc/x'], 10_000);
    expect(r.error, 'detsim certs /proc/x did not return').toBeUndefined();
    expect(expectCliRefusal(r, 'perm_out_dir_unwritable', 'dir')).toBe(
      'detsim: [perm_out_dir_unwritable] dir: /proc/x is on a kernel filesystem (/proc), not a place for a TLS set',
    );
  });
});

describe('a TLS run', () => {
  const certs = join(root, 'run-certs');
  beforeAll(() => expect(detsimCli(['certs', certs]).status).toBe(0));

  /** Run `example`'s golden over tcp with this run's TLS set; it must reproduce the golden, leaking no secret. */
  function expectGoldenOverTls(example: string): void {
    const golden = readGolden(DEFAULT_GOLDEN_DIR, example)!;
    const out = join(root, `runs-${example}`);
    const r = detsimCli(
      [
        'run',
        golden.config,
        '--steps',
        String(golden.steps),
        '--transport',
        'tcp',
        '--tls-dir',
        certs,
        '--out',
        out,
        '--json',
      ],
      120_000,
    );
    expect(r.status, r.stderr).toBe(0);
    // gRPC is given a DNS name of the worker certificate as TLS server name, never the IP address dialled.
    expect(r.stderr).not.toContain('DEP0123');
    const result = JSON.parse(r.stdout) as { reproHash: string; behaviourDigest: string; runDir: string };
    expect([result.reproHash, result.behaviourDigest]).toEqual([golden.reproHash, golden.behaviourDigest]);
    // Where the set is is a launch fact (launch.json, for resume); no other file names it.
    const written = allText(out, 'launch.json') + r.stdout + r.stderr;
    expect(JSON.parse(readFileSync(join(result.runDir, 'launch.json'), 'utf8')).tls).toEqual({
      dir: certs,
      perRun: false,
    });
    expect(written).not.toContain(readFileSync(join(certs, 'token'), 'utf8').trim());
    for (const key of ['coordinator-key.pem', 'worker-key.pem']) {
      const body = readFileSync(join(certs, key), 'utf8').split('\n')[1]!;
      expect(written).not.toContain(body);
    }
    expect(written).not.toContain(certs);
  }

  it('forage-walkers over tcp with mutual TLS reproduces the golden ReproHash; no key or token in the run', () => {
    expectGoldenOverTls('forage-walkers');
  }, 150_000);

  it.skipIf(rustWorkerSkip !== null)(
    'mixed-walkers (a TypeScript and a Rust agent worker) over tcp with mutual TLS reproduces its golden ReproHash',
    () => {
      ensureRustWorker();
      expectGoldenOverTls('mixed-walkers');
    },
    1_500_000,
  );

  const refusedBeforeStart = (args: string[], reason: string, field: string): string => {
    const out = join(root, `refused-${reason}`);
    const line = expectCliRefusal(
      detsimCli(['run', 'examples/forage-walkers.yaml', '--steps', '2', '--out', out, ...args]),
      reason,
      field,
    );
    expect(existsSync(out) ? readdirSync(out) : []).toEqual([]);
    return line;
  };

  it('--tls-dir alone (no --transport) runs the workers over tcp with that set: the golden', () => {
    const golden = readGolden(DEFAULT_GOLDEN_DIR, 'forage-walkers')!;
    const out = join(root, 'runs-tls-dir-alone');
    const r = detsimCli(
      ['run', golden.config, '--steps', String(golden.steps), '--tls-dir', certs, '--out', out, '--json'],
      110_000,
    );
    expect(r.status, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as { reproHash: string; runDir: string };
    expect(result.reproHash).toBe(golden.reproHash);
    expect(JSON.parse(readFileSync(join(result.runDir, 'run.json'), 'utf8')).transport).toBe('tcp');
    expect(JSON.parse(readFileSync(join(result.runDir, 'launch.json'), 'utf8')).tls).toEqual({
      dir: certs,
      perRun: false,
    });
  }, 150_000);

  it('is refused on the unix transport: TLS is for TCP workers', () => {
    expect(
      refusedBeforeStart(['--tls-dir', certs, '--transport', 'unix'], 'struct_invalid_field', 'workers.tls.dir'),
    ).toBe(
      "detsim: [struct_invalid_field] workers.tls.dir: TLS is for TCP workers; set workers.transport: tcp (this run's transport is unix)",
    );
  });

  it('is refused when a file of the set is missing, naming it', () => {
    const broken = join(root, 'broken-certs');
    expect(detsimCli(['certs', broken]).status).toBe(0);
    unlinkSync(join(broken, 'coordinator-key.pem'));
    expect(
      refusedBeforeStart(['--transport', 'tcp', '--tls-dir', broken], 'perm_tls_unreadable', 'workers.tls.dir'),
    ).toBe(
      `detsim: [perm_tls_unreadable] workers.tls.dir: private key ${join(broken, 'coordinator-key.pem')} cannot be read (ENOENT)`,
    );
  });

  it('is refused when the worker pair comes from another set, naming the file (exit 2, no run directory)', () => {
    const mixed = join(root, 'mixed-certs');
    expect(detsimCli(['certs', mixed]).status).toBe(0);
    for (const file of ['worker.pem', 'worker-key.pem']) copyFileSync(join(otherCerts(), file), join(mixed, file));
    expect(
      refusedBeforeStart(['--transport', 'tcp', '--tls-dir', mixed], 'ident_foreign_certificate', 'workers.tls.dir'),
    ).toBe(
      `detsim: [ident_foreign_certificate] workers.tls.dir: ${join(mixed, 'worker.pem')} is not signed by ${join(mixed, 'ca.pem')} (files from two different sets?)`,
    );
  });

  it('is refused when its certificates have expired, naming the file (exit 2, no run directory)', () => {
    const expired = join(root, 'expired-certs');
    makeExpiredTlsSet(expired);
    expect(
      refusedBeforeStart(['--transport', 'tcp', '--tls-dir', expired], 'perm_tls_expired', 'workers.tls.dir'),
    ).toBe(
      `detsim: [perm_tls_expired] workers.tls.dir: ${join(expired, 'ca.pem')} expired on 2020-02-01T00:00:00.000Z; make a new set (detsim certs)`,
    );
  });

  it('a launched worker presenting another CA’s certificate is refused before the run begins: no run directory', async () => {
    const out = join(root, 'refused-launched-identity');
    const plan = { ...loadConfig('examples/forage-walkers.yaml'), transport: 'tcp' as const, tls: { dir: certs } };
    const base = defaultWorkerCommand();
    const foreign = ['--tls-cert', join(otherCerts(), 'worker.pem'), '--tls-key', join(otherCerts(), 'worker-key.pem')];
    const e = await runSession(plan, {
      outDir: out,
      steps: 2,
      logLevel: 'warn',
      hooks: { commandFor: () => ({ command: base.command, args: [...base.args, ...foreign] }) },
    }).then(
      () => new Error('ran: expected a refusal'),
      (err: unknown) => err,
    );
    if (!(e instanceof DetsimError)) throw e;
    expect(e.reason).toBe('ident_foreign_certificate');
    expect(e.message).toMatch(
      /^worker worker-[0-9a-z-]+ .* is not the expected worker at phase startup: the worker's certificate is not signed by this run's CA \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\); refused before the run started, nothing was written$/,
    );
    // Nothing half-written: no run directory (so no run.log, trace, ledger or lock).
    expect(readdirSync(out)).toEqual([]);
  }, 60_000);

  it('launches its workers on TLS only: the fleet says Hello, a plaintext client never connects', async () => {
    const plan = { ...loadConfig('examples/forage-walkers.yaml'), transport: 'tcp' as const, tls: { dir: certs } };
    const fleet = await launchFleet(plan, { logger: pino({ level: 'silent' }) });
    try {
      expect(fleet.agents.map((w) => w.hello.workerId)).toEqual(plan.workers.slice(1).map((w) => w.workerId));
      const plaintext = WorkerClient.connect(fleet.agents[0]!.address, { connectTimeoutMs: 1_000 });
      await expect(plaintext).rejects.toBeInstanceOf(WorkerCallError);
    } finally {
      await fleet.shutdown();
    }
  }, 60_000);

  it.each([
    [
      'a certificate of another CA',
      ['--tls-cert', 'worker.pem', '--tls-key', 'worker-key.pem'],
      "the worker's certificate is not signed by this run's CA (UNABLE_TO_VERIFY_LEAF_SIGNATURE)",
    ],
    [
      'another CA as its trust',
      ['--tls-ca', 'ca.pem'],
      "the worker refused this coordinator's certificate: it trusts another CA (another run's set?)",
    ],
  ])(
    'names a launched worker with %s at once, before any Hello (identity, not a timeout)',
    async (_, files, why) => {
      const other = otherCerts();
      const plan = { ...loadConfig('examples/forage-walkers.yaml'), transport: 'tcp' as const, tls: { dir: certs } };
      const base = defaultWorkerCommand();
      // The worker's own flags override --tls-dir's files: here with those of another run's set.
      const flags = files.map((f, i) => (i % 2 === 1 ? join(other, f) : f));
      const startedAt = Date.now();
      const e = await launchFleet(plan, {
        logger: pino({ level: 'silent' }),
        commandFor: () => ({ command: base.command, args: [...base.args, ...flags] }),
      }).then(
        () => new Error('launched: expected a refusal'),
        (err: unknown) => err,
      );
      if (!isRunFailure(e)) throw e;
      expect(e.kind).toBe('identity');
      // Whichever worker is probed first is named: `worker worker-N (agents …) is not the expected worker …`.
      expect(e.message, e.message).toMatch(
        /^worker worker-[0-9a-z-]+ .* is not the expected worker at phase startup: /,
      );
      expect(e.reason).toBe('ident_foreign_certificate');
      expect(e.message.endsWith(`: ${why}`), e.message).toBe(true);
      expect(Date.now() - startedAt).toBeLessThan(plan.deadlines.startupMs);
    },
    60_000,
  );

  it('takes workers.tls.dir from the config, relative to the config file', () => {
    const config = {
      sessionId: 's1',
      masterSeed: '1',
      steps: 1,
      environment: { id: 'env', model: 'forage' },
      agents: { count: 1, prefix: 'a-', model: 'walker' },
      workers: { transport: 'tcp', tls: { dir: 'certs' } },
    };
    expect(resolveConfig(config, { baseDir: '/experiments/x' }).tls).toEqual({ dir: '/experiments/x/certs' });
  });
});

describe('detsim worker --tls-dir (the CLI)', () => {
  it('refuses an unreadable set naming the file, exit 2, before listening', () => {
    const r = detsimCli(['worker', '--listen', '0.0.0.0:0', '--role', 'agent', '--worker-id', 'w1', '--tls-dir', root]);
    expect(expectCliRefusal(r, 'perm_tls_unreadable', '--tls-dir')).toBe(
      `detsim: [perm_tls_unreadable] --tls-dir: token ${join(root, 'token')} cannot be read (ENOENT)`,
    );
  });
});
