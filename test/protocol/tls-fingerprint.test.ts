// certificateFingerprint (core/protocol/tls.ts): lowercase hex SHA-256 of the DER certificate, checked
// against the `openssl x509 -fingerprint -sha256` of a real certificate made by the openssl binary.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { certificateFingerprint } from '../../core/protocol/tls.js';
import { refusal } from '../refusal.js';

const dir = mkdtempSync(join(tmpdir(), 'detsim-fp-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function selfSigned(): string {
  const cert = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=fingerprint-test',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return cert;
}

describe('certificateFingerprint', () => {
  it('equals openssl sha256 fingerprint of the DER, lowercase without colons', () => {
    const cert = selfSigned();
    const openssl = execFileSync('openssl', ['x509', '-in', cert, '-noout', '-fingerprint', '-sha256']).toString();
    const expected = openssl.trim().split('=')[1]!.replaceAll(':', '').toLowerCase();
    expect(certificateFingerprint(readFileSync(cert, 'utf8'))).toBe(expected);
    expect(expected).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses text that is not a certificate, naming the field and echoing nothing', () => {
    const e = refusal(() => certificateFingerprint('-----BEGIN CERTIFICATE-----\nsecret\n', 'worker.cert'));
    expect(e.reason).toBe('struct_invalid_field');
    expect(e.message).toBe('worker.cert: not a PEM X.509 certificate');
  });
});
