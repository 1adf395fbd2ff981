// TLS identity helpers shared by the coordinator and the workers: the certificate fingerprint that
// rendezvous records and checks carry (lowercase hex SHA-256 of the DER certificate), the gRPC
// credentials of both ends (mutual TLS; the bearer token as call metadata) and the constant-time
// token check. Not file reading: callers pass PEM bytes and the token in (core/formats/tls-dir.ts).
import { X509Certificate, createHash, timingSafeEqual } from 'node:crypto';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import type * as grpc from '@grpc/grpc-js';
import { loadGrpc } from './grpc-service.js';
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
  return derFingerprint(certificate.raw);
}

/**
 * Lowercase hex SHA-256 of a certificate's DER bytes (`X509Certificate.raw`, or the `raw` of the
 * certificate a TLS peer presents): the one definition of the fingerprint records carry.
 */
export function derFingerprint(der: Buffer): string {
  return createHash('sha256').update(der).digest('hex');
}

/** The gRPC metadata key that carries the bearer token (`authorization: Bearer <token>`). */
export const TOKEN_METADATA_KEY = 'authorization';

/** One side's TLS material, in memory (the caller reads the files): PEM bytes and the bearer token. */
export interface TlsCredentialsInput {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
  /** Secret: never logged, never in a receipt or trace. */
  token: string;
}

/** What a worker answers a call whose token check failed; details are this text, no body ever follows. */
export const TOKEN_REFUSALS = {
  ident_token_missing: 'authorization: the call carries no bearer token; this worker serves only its run',
  ident_token_wrong: "authorization: the bearer token is not this worker's run token",
} as const;
export type TokenRefusal = keyof typeof TOKEN_REFUSALS;

/**
 * Check an `authorization` metadata value against the run's token: undefined when it matches, else
 * the refusal. The two are compared as SHA-256 digests with timingSafeEqual, so neither the length
 * nor a common prefix of the token shows in the time taken.
 */
export function checkBearer(expected: string, presented: unknown): TokenRefusal | undefined {
  if (typeof presented !== 'string' && !Buffer.isBuffer(presented)) return 'ident_token_missing';
  const text = presented.toString();
  if (!text.startsWith('Bearer ') || text.length === 'Bearer '.length) return 'ident_token_missing';
  const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(text.slice('Bearer '.length)), digest(expected)) ? undefined : 'ident_token_wrong';
}

/** The server side: mutual TLS (a client certificate signed by `ca` is required at the handshake). */
export function workerServerCredentials(tls: TlsCredentialsInput): grpc.ServerCredentials {
  return loadGrpc().ServerCredentials.createSsl(tls.ca, [{ private_key: tls.key, cert_chain: tls.cert }], true);
}

/**
 * The client side: TLS with the coordinator's certificate, and the bearer token on every call.
 * `verify` replaces the host-name check (e.g. {@link verifyDialledHost}, or a worker pinned by its
 * rendezvous record's fingerprint); the chain is verified against `tls.ca` either way.
 */
export function coordinatorChannelCredentials(
  tls: TlsCredentialsInput,
  verify?: grpc.VerifyOptions,
): grpc.ChannelCredentials {
  const { credentials, Metadata } = loadGrpc();
  const token = credentials.createFromMetadataGenerator((_params, callback) => {
    const metadata = new Metadata();
    metadata.set(TOKEN_METADATA_KEY, `Bearer ${tls.token}`);
    callback(null, metadata);
  });
  return credentials.combineChannelCredentials(credentials.createSsl(tls.ca, tls.key, tls.cert, verify), token);
}

/**
 * Check the worker's certificate against the host dialled, whatever server name the channel sends
 * (GrpcLinkOptions.serverName carries a DNS name where the host dialled is an IP address).
 */
export function verifyDialledHost(dialledHost: string): grpc.VerifyOptions {
  return {
    checkServerIdentity: (_serverName: string, cert: PeerCertificate) => checkServerIdentity(dialledHost, cert),
  };
}

/**
 * A DNS name the certificate `pem` carries (its first DNS subject alternative name), to send as
 * the TLS server name where the host dialled is an IP address; undefined when it names none.
 */
export function certificateDnsName(pem: string | Buffer): string | undefined {
  const names = new X509Certificate(pem).subjectAltName ?? '';
  return /(?:^|, )DNS:([^,]+)/.exec(names)?.[1];
}
