// The worker protocol contract as loaded at run time: the proto file, its digest (CONTRACT_DIGEST),
// the protocol version, size limits and addresses. Loads no gRPC: a worker thread imports it, and the
// gRPC service definition and channel options live in grpc-service.ts. Not the envelopes
// (envelope.ts) nor the frame codec (frames.ts); no stream logic lives here.
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sha256Hex } from '../formats/canonical-json.js';
import { DetsimError } from '../formats/errors.js';

export const PROTO_RELATIVE_PATH = 'proto/detsim/v1/worker.proto';
export const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;
export const PROTOCOL_MAJOR = 1;
export const PROTOCOL_MINOR = 0;
/** Unix socket paths must stay below this many bytes (sun_path is ~108 with the terminator). */
export const MAX_SOCKET_PATH_BYTES = 100;

/** Walk up from this module to the package root: works from TS source (tsx/vitest) and dist/. */
export function findPackageRoot(start = dirname(fileURLToPath(import.meta.url))): string {
  let dir = start;
  for (;;) {
    if (existsSync(join(dir, PROTO_RELATIVE_PATH)) && existsSync(join(dir, 'package.json'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find ${PROTO_RELATIVE_PATH} above ${start}`);
    dir = parent;
  }
}

export const PROTO_PATH = join(findPackageRoot(), PROTO_RELATIVE_PATH);
/** SHA-256 of the proto file's bytes: what Worker.Hello negotiates. */
export const CONTRACT_DIGEST: string = sha256Hex(readFileSync(PROTO_PATH));

/** One frame on the stream: either a body (canonical JSON envelope) or a chunk of the attachment. */
export interface Frame {
  body?: Buffer | Uint8Array;
  chunk?: Buffer | Uint8Array;
}

export type ListenAddress =
  { kind: 'unix'; path: string; target: string } | { kind: 'tcp'; host: string; port: number; target: string };

/** Parse `unix:/abs/path` or `host:port`; refuse relative or over-long socket paths up front. */
export function parseAddress(text: string, field = 'listen'): ListenAddress {
  if (text.startsWith('unix:')) {
    const path = text.slice('unix:'.length);
    if (!isAbsolute(path))
      throw new DetsimError(
        'struct_invalid_field',
        `${field}: unix socket path ${JSON.stringify(path)} must be absolute (unix:/abs/path)`,
        field,
      );
    if (Buffer.byteLength(path) >= MAX_SOCKET_PATH_BYTES) {
      throw new DetsimError(
        'struct_invalid_field',
        `${field}: unix socket path is ${Buffer.byteLength(path)} bytes; it must be under ${MAX_SOCKET_PATH_BYTES}`,
        field,
      );
    }
    return { kind: 'unix', path, target: `unix:${path}` };
  }
  const m = /^(.+):([0-9]{1,5})$/.exec(text);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 0 && port <= 65535)) {
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: ${JSON.stringify(text)} is neither unix:/abs/path nor host:port`,
      field,
    );
  }
  return { kind: 'tcp', host: m[1]!, port, target: `${m[1]}:${port}` };
}

/** What a worker may listen on (docs/security.md): plaintext stays on this machine. */
export const LOCAL_LISTEN_RULE =
  'without TLS a worker listens only on unix:/abs/path or a loopback host (127.0.0.0/8, ::1, localhost); any other host needs TLS and a bearer token (--tls-dir)';

/** True for a loopback host: `localhost`, `::1` (bracketed or not) or a dotted IPv4 address in 127.0.0.0/8. */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host === '::1' || host === '[::1]') return true;
  const m = /^127\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$/.exec(host);
  return m !== null && m.slice(1).every((octet) => Number(octet) <= 255);
}

/**
 * A worker's listen address: parseAddress, then refuse a TCP host that is not loopback (`0.0.0.0`,
 * a LAN address, a host name) unless the worker is `authenticated` (mutual TLS and a bearer token).
 */
export function parseListenAddress(text: string, field = 'listen', authenticated = false): ListenAddress {
  const address = parseAddress(text, field);
  if (address.kind === 'tcp' && !authenticated && !isLoopbackHost(address.host)) {
    throw new DetsimError(
      'perm_listen_not_local',
      `${field}: ${JSON.stringify(address.host)} is not a loopback address; ${LOCAL_LISTEN_RULE}`,
      field,
    );
  }
  return address;
}

/** Remove a stale socket file before bind (a leftover file fails bind with a misleading EADDRINUSE). */
export function removeStaleSocket(path: string): void {
  try {
    if (statSync(path).isSocket()) rmSync(path, { force: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}
