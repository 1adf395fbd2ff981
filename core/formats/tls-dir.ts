// The layout of a TLS directory made by `detsim certs` (per-run CA certificate, the coordinator's
// client pair, the workers' server pair, the bearer token) and reading one side's files from it,
// each missing or unreadable file refused by name. Not generation (coordinator/launch/certs.ts) and not
// credentials or the token check (core/protocol/tls.ts). Never echoes a file's bytes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DetsimError } from './errors.js';

/** The files of a TLS directory. The CA's private key is never kept: the set cannot be extended. */
export const TLS_FILES = {
  ca: 'ca.pem',
  coordinatorCert: 'coordinator.pem',
  coordinatorKey: 'coordinator-key.pem',
  workerCert: 'worker.pem',
  workerKey: 'worker-key.pem',
  token: 'token',
} as const;

/** The files one side reads: a worker host needs only these four (never the coordinator's key). */
export type TlsSide = 'coordinator' | 'worker';

/** One side's TLS material in memory: PEM bytes and the bearer token text (secret; never log it). */
export interface TlsMaterial {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
  token: string;
}

/** Where each file of `side` lives; explicit paths override the directory's. */
export interface TlsPaths {
  ca: string;
  cert: string;
  key: string;
  token: string;
}

/** The paths of `side`'s files under `dir`. */
export function tlsPathsIn(dir: string, side: TlsSide): TlsPaths {
  return {
    ca: join(dir, TLS_FILES.ca),
    cert: join(dir, side === 'worker' ? TLS_FILES.workerCert : TLS_FILES.coordinatorCert),
    key: join(dir, side === 'worker' ? TLS_FILES.workerKey : TLS_FILES.coordinatorKey),
    token: join(dir, TLS_FILES.token),
  };
}

/** A bearer token: 32 to 256 characters of URL-safe text (what `detsim certs` writes is 64 hex digits). */
const TOKEN_FORM = /^[A-Za-z0-9._~+/=-]{32,256}$/;

/**
 * Read the files at `paths` (`field` names the flag or config key they came from). A missing,
 * unreadable or malformed file is refused naming its path and what is wrong, never its content.
 */
export function readTlsMaterial(paths: TlsPaths, field: string): TlsMaterial {
  const pem = (path: string, what: string, marker: RegExp): Buffer => {
    const bytes = readTlsFile(path, what, field);
    if (!marker.test(bytes.toString('latin1')))
      throw new DetsimError('perm_tls_unreadable', `${field}: ${what} ${path} is not a PEM ${what}`, field);
    return bytes;
  };
  const certificate = /-----BEGIN CERTIFICATE-----/;
  const token = readTokenFile(paths.token, field);
  return {
    ca: pem(paths.ca, 'CA certificate', certificate),
    cert: pem(paths.cert, 'certificate', certificate),
    key: pem(paths.key, 'private key', /-----BEGIN (EC |RSA )?PRIVATE KEY-----/),
    token,
  };
}

/**
 * A run's bearer token from its file (a TLS set's `token`, or a plaintext TCP run's per-run secret
 * given with --token-file): one line of 32 to 256 URL-safe characters, refused naming the path, never
 * echoing the content.
 */
export function readTokenFile(path: string, field: string): string {
  const token = readTlsFile(path, 'token', field).toString('utf8').trim();
  if (!TOKEN_FORM.test(token))
    throw new DetsimError(
      'perm_tls_unreadable',
      `${field}: token ${path} must hold one line of 32 to 256 URL-safe characters`,
      field,
    );
  return token;
}

function readTlsFile(path: string, what: string, field: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new DetsimError('perm_tls_unreadable', `${field}: ${what} ${path} cannot be read (${code})`, field);
  }
}
