// TLS identity helpers shared by the coordinator and the workers: the certificate fingerprint that
// rendezvous records and checks carry (lowercase hex SHA-256 of the DER certificate).
// Not file reading (callers pass PEM text in) and not credential construction for gRPC.
import { X509Certificate, createHash } from 'node:crypto';
import { DetsimError } from '../formats/errors.js';

/**
 * Lowercase hex SHA-256 of the DER encoding of the first certificate in `pem`, the same value as
 * `openssl x509 -noout -fingerprint -sha256` without colons. Refuses text that is not a certificate
 * (reason `struct_invalid_field`, naming `field`) without echoing the text.
 */
export function certificateFingerprint(pem: string | Buffer, field = 'certificate'): string {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(pem);
  } catch {
    throw new DetsimError('struct_invalid_field', `${field}: not a PEM X.509 certificate`, field);
  }
  return createHash('sha256').update(certificate.raw).digest('hex');
}
