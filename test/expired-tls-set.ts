// Test helper: a complete TLS set in the `detsim certs` layout (CA, coordinator and worker pairs,
// token) whose certificates all expired long ago (valid 2020-01-01 to 2020-02-01), made with
// `openssl ca` and fixed dates, since `openssl req/x509 -days` (what certs.ts uses) cannot issue
// a certificate already expired. Same extensions as certs.ts (its opensslConfig). Not a fixture on
// disk: the key pairs are fresh each time, the dates are fixed, so the outcome is deterministic.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { opensslConfig } from '../coordinator/launch/certs.js';
import { TLS_FILES } from '../core/formats/tls-dir.js';

const START = '20200101000000Z';
const END = '20200201000000Z';

/** certs.ts's sections, then the `openssl ca` one (-name; a throwaway database in the staging directory). */
function caConfig(): string {
  return [
    opensslConfig([]),
    '[CA_default]',
    'database = index.txt',
    'new_certs_dir = .',
    'serial = serial',
    'default_md = sha256',
    'policy = policy_any',
    'unique_subject = no',
    '[policy_any]',
    'commonName = supplied',
    '',
  ].join('\n');
}

/** Make an expired set in `dir` (created 0700): every certificate's notAfter is 2020-02-01. */
export function makeExpiredTlsSet(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const staging = mkdtempSync(join(dir, '.expired-staging-'));
  const openssl = (args: string[]): void => {
    execFileSync('openssl', args, { cwd: staging, stdio: ['ignore', 'ignore', 'pipe'] });
  };
  try {
    writeFileSync(join(staging, 'openssl.cnf'), caConfig());
    writeFileSync(join(staging, 'index.txt'), '');
    writeFileSync(join(staging, 'serial'), '01\n');
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-config', 'openssl.cnf'];
    const sign = (csr: string, out: string, extensions: string, self: boolean): void =>
      openssl([
        'ca',
        '-batch',
        '-notext',
        '-config',
        'openssl.cnf',
        '-name',
        'CA_default',
        '-startdate',
        START,
        '-enddate',
        END,
        '-keyfile',
        'ca-key.pem',
        ...(self ? ['-selfsign'] : ['-cert', join(dir, TLS_FILES.ca)]),
        '-extensions',
        extensions,
        '-in',
        csr,
        '-out',
        out,
      ]);
    openssl(['req', '-new', ...ec, '-keyout', 'ca-key.pem', '-out', 'ca.csr', '-subj', '/CN=detsim run CA']);
    sign('ca.csr', join(dir, TLS_FILES.ca), 'ca', true);
    const leaf = (name: string, cert: string, key: string, section: string): void => {
      openssl(['req', '-new', ...ec, '-keyout', join(dir, key), '-out', `${section}.csr`, '-subj', `/CN=${name}`]);
      chmodSync(join(dir, key), 0o600);
      sign(`${section}.csr`, join(dir, cert), section, false);
    };
    leaf('detsim coordinator', TLS_FILES.coordinatorCert, TLS_FILES.coordinatorKey, 'client');
    leaf('detsim worker', TLS_FILES.workerCert, TLS_FILES.workerKey, 'server');
    writeFileSync(join(dir, TLS_FILES.token), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
