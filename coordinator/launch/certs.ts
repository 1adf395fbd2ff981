// `detsim certs <dir>`: make a per-run TLS set with the `openssl` binary — a CA (its key is
// discarded once the two leaves are signed), the coordinator's client pair, the workers' server
// pair (SANs localhost, 127.0.0.1, ::1 and every --host) and a random bearer token. Keys and the
// token are 0600, the directory 0700; no existing file is ever overwritten (all are checked before
// anything is made, then each is linked into place, which fails rather than replaces).
// Not reading the set (core/formats/tls-dir.ts) and not the gRPC credentials (core/protocol/tls.ts).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { checkRunsParent } from '../session/run-dir.js';
import { processExists } from './socket-dir.js';
import {
  chmodSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';
import { TLS_FILES } from '../../core/formats/tls-dir.js';

export interface CertsOptions {
  /** Extra worker host names or IP addresses for the server certificate's SANs (repeatable --host). */
  hosts?: readonly string[];
  /** Validity in days (default 30). */
  days?: number;
}

/** The files `detsim certs` writes, in the order it reports them. */
export const CERT_SET_FILES: readonly string[] = [
  TLS_FILES.ca,
  TLS_FILES.coordinatorCert,
  TLS_FILES.coordinatorKey,
  TLS_FILES.workerCert,
  TLS_FILES.workerKey,
  TLS_FILES.token,
];
const SECRET_FILES = new Set<string>([TLS_FILES.coordinatorKey, TLS_FILES.workerKey, TLS_FILES.token]);
const DEFAULT_DAYS = 30;
const HOST_FORM = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/;

/** Make the set in `dir` (created 0700 if absent); returns the file names written. */
export function makeCertSet(dir: string, options: CertsOptions = {}): string[] {
  const hosts = readHosts(options.hosts ?? []);
  const days = options.days ?? DEFAULT_DAYS;
  prepareTargetDir(dir);
  sweepStaleStaging(dir);
  // Staged inside the target (same file system, so linking is atomic), 0700 from its creation; named
  // with this pid, so that a later run can tell a killed run's leftovers (a CA key among them) apart.
  const staging = mkdtempSync(join(dir, `${STAGING_PREFIX}${process.pid}-`));
  // While openssl runs, a signal must not end detsim before the staging directory (a CA key in it) is
  // removed: with a listener, Node does not die at once; Ctrl-C ends openssl, and the finally cleans up.
  const hold = (): void => undefined;
  for (const signal of HELD_SIGNALS) process.on(signal, hold);
  try {
    issueInto(staging, hosts, days);
    for (const name of CERT_SET_FILES) chmodSync(join(staging, name), SECRET_FILES.has(name) ? 0o600 : 0o644);
    publish(staging, dir);
  } finally {
    rmSync(staging, { recursive: true, force: true });
    for (const signal of HELD_SIGNALS) process.off(signal, hold);
  }
  return [...CERT_SET_FILES];
}

const STAGING_PREFIX = '.certs-staging-';
const HELD_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Remove staging directories a killed `detsim certs` left (its pid is gone): they may hold a CA key. */
function sweepStaleStaging(dir: string): void {
  for (const name of readdirSync(dir)) {
    const m = /^\.certs-staging-(\d+)-/.exec(name);
    if (m === null || processExists(Number(m[1]))) continue;
    rmSync(join(dir, name), { recursive: true, force: true });
  }
}

/** Each --host is a DNS name or an IP address: it goes into the worker certificate's SANs. */
function readHosts(hosts: readonly string[]): string[] {
  for (const host of hosts) {
    if (isIP(host) === 0 && !HOST_FORM.test(host))
      throw new DetsimError(
        'struct_invalid_field',
        `--host ${JSON.stringify(host)} is not a host name or IP address`,
        '--host',
      );
  }
  return [...new Set(hosts)];
}

/** Create `dir` 0700, or accept an existing one that no other user can open and that holds none of the files. */
function prepareTargetDir(dir: string): void {
  if (!existsSync(dir)) {
    // A recursive mkdir under /proc never returns: the nearest existing ancestor is checked first.
    checkRunsParent(dir, 'dir', 'a TLS set');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    return;
  }
  const st = statSync(dir);
  if (!st.isDirectory()) throw new DetsimError('perm_certs_target', `${dir} exists and is not a directory`, 'dir');
  if ((st.mode & 0o077) !== 0)
    throw new DetsimError(
      'perm_certs_target',
      `${dir} is open to other users (mode ${(st.mode & 0o777).toString(8)}); keys need a 0700 directory`,
      'dir',
    );
  const present = CERT_SET_FILES.filter((name) => existsSync(join(dir, name)));
  if (present.length > 0)
    throw new DetsimError(
      'perm_certs_target',
      `${dir} already holds ${present.join(', ')}; detsim certs never overwrites (use an empty directory)`,
      'dir',
    );
}

/** Run openssl in `staging`: CA, two leaves signed by it, the token; then drop the CA key. */
function issueInto(staging: string, hosts: string[], days: number): void {
  const openssl = (args: string[]): void => {
    try {
      execFileSync('openssl', args, { cwd: staging, stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (e) {
      const err = e as NodeJS.ErrnoException & { stderr?: Buffer };
      const why = err.code === 'ENOENT' ? 'the openssl binary is not on PATH' : `openssl ${args[0]} failed`;
      throw new DetsimError('perm_tls_unreadable', `detsim certs: ${why}`, 'openssl');
    }
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  writeFileSync(join(staging, 'openssl.cnf'), opensslConfig(hosts), { mode: 0o600 });
  openssl([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca-key.pem',
    '-out',
    TLS_FILES.ca,
    '-days',
    String(days),
    '-config',
    'openssl.cnf',
    '-subj',
    '/CN=detsim run CA',
    '-extensions',
    'ca',
  ]);
  const leaf = (name: string, cert: string, key: string, section: string): void => {
    openssl([
      'req',
      '-new',
      ...ec,
      '-keyout',
      key,
      '-out',
      `${section}.csr`,
      '-config',
      'openssl.cnf',
      '-subj',
      `/CN=${name}`,
    ]);
    openssl([
      'x509',
      '-req',
      '-in',
      `${section}.csr`,
      '-CA',
      TLS_FILES.ca,
      '-CAkey',
      'ca-key.pem',
      '-days',
      String(days),
      '-set_serial',
      `0x${randomBytes(16).toString('hex')}`,
      '-extfile',
      'openssl.cnf',
      '-extensions',
      section,
      '-out',
      cert,
    ]);
  };
  leaf('detsim coordinator', TLS_FILES.coordinatorCert, TLS_FILES.coordinatorKey, 'client');
  leaf('detsim worker', TLS_FILES.workerCert, TLS_FILES.workerKey, 'server');
  rmSync(join(staging, 'ca-key.pem'));
  writeFileSync(join(staging, TLS_FILES.token), `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
}

/** The openssl configuration: CA, client (clientAuth) and server (serverAuth + SANs) extensions. */
export function opensslConfig(hosts: string[]): string {
  const names = ['DNS:localhost', 'IP:127.0.0.1', 'IP:::1', ...hosts.map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`))];
  return [
    '[req]',
    'distinguished_name = dn',
    'prompt = no',
    '[dn]',
    '[ca]',
    'basicConstraints = critical, CA:TRUE, pathlen:0',
    'keyUsage = critical, keyCertSign, cRLSign',
    'subjectKeyIdentifier = hash',
    '[client]',
    'basicConstraints = critical, CA:FALSE',
    'keyUsage = critical, digitalSignature',
    'extendedKeyUsage = clientAuth',
    '[server]',
    'basicConstraints = critical, CA:FALSE',
    'keyUsage = critical, digitalSignature',
    'extendedKeyUsage = serverAuth',
    `subjectAltName = ${[...new Set(names)].join(', ')}`,
    '',
  ].join('\n');
}

/** Link every file into `dir`: link(2) fails with EEXIST rather than replacing a file that appeared meanwhile. */
function publish(staging: string, dir: string): void {
  const linked: string[] = [];
  try {
    for (const name of CERT_SET_FILES) {
      linkSync(join(staging, name), join(dir, name));
      linked.push(name);
    }
  } catch (e) {
    for (const name of linked) rmSync(join(dir, name), { force: true });
    if ((e as NodeJS.ErrnoException).code === 'EEXIST')
      throw new DetsimError(
        'perm_certs_target',
        `${dir}: a file of the set appeared while it was made; nothing written`,
        'dir',
      );
    throw e;
  }
}
