// A worker process: validates its options (a loopback or unix listen address, or any TCP address
// with mutual TLS and a bearer token; the model modules it may load), binds the gRPC server, prints the one ready line, feeds requests through the
// runtime one at a time (replies in request order, each stream Hello-first) and exits on
// Shutdown, SIGTERM/SIGINT/SIGHUP, or when its parent goes away. Not the protocol semantics (runtime.ts).
import { fstatSync, readFileSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { DetsimError } from '../core/formats/errors.js';
import { requireExistingDirectory } from '../core/formats/existing-dir.js';
import { isId } from '../core/formats/scalars.js';
import {
  type TlsMaterial,
  type TlsPaths,
  readTlsMaterial,
  readTokenFile,
  tlsPathsIn,
} from '../core/formats/tls-dir.js';
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type Role,
  type SessionConnection,
  type SessionHandler,
  type StartedServer,
  CONTRACT_DIGEST,
  RENDEZVOUS_FORMAT,
  certificateFingerprint,
  type RendezvousRecord,
  advertisedAddress,
  checkAdvertise,
  parseAddress,
  parseListenAddress,
  readRendezvousRecord,
  removeRendezvousRecord,
  rendezvousFileName,
  rendezvousRecordBytes,
  writeRendezvousRecord,
  startWorkerServer,
  startSocketServer,
  checkListenResolves,
  STORE_ID_PATTERN,
  storeHoldsId,
} from '../core/protocol/index.js';
import { replyBody } from '../core/protocol/body-codec.js';
import { readModelFlags } from './models/registry.js';
import { RequestQueue } from './request-queue.js';
import { type StreamState, WorkerRuntime } from './runtime.js';
import { startParentWatchdog } from './parent-watchdog.js';

export interface WorkerProcessOptions {
  listen: string;
  role: Role;
  workerId: string;
  sessionId?: string;
  strict?: boolean;
  /** Absolute paths of the model modules this worker may load besides the built-ins. */
  models?: string[];
  maxMessageBytes?: number;
  /**
   * Exit when the parent process goes away (stdin pipe closes, or the parent pid changes), even
   * while model code blocks the event loop (a watchdog thread then SIGKILLs the process). Default true.
   */
  parentWatch?: boolean;
  /** The run's checkpoint store: store-files-v1 reads and writes only files under it (absent: none). */
  storeDir?: string;
  /**
   * `--store-id`: the token the coordinator keeps in its store (core/protocol/store-id.ts). With it,
   * `storeDir` is used only if it holds this token; otherwise the worker runs as if it had no store.
   */
  storeId?: string;
  /** `--rendezvous DIR`: once listening, write this worker's record there (removed again on exit). */
  rendezvous?: string;
  /** `--advertise HOST:PORT`: the address the record announces (port 0: the bound port). */
  advertise?: string;
  /** Mutual TLS and the bearer token (TCP only; required on a non-loopback host). Secret: never logged. */
  tls?: TlsMaterial;
  /**
   * A plaintext TCP worker's per-run secret (`--token-file` without TLS): every stream must carry it
   * as its bearer token before its first frame is read. Secret: never logged.
   */
  token?: string;
  /**
   * `--wire socket`: speak the socket wire (core/protocol/socket-wire.ts) instead of gRPC — what the
   * coordinator asks of the TypeScript worker processes it starts on its own Unix sockets. Default gRPC.
   */
  wire?: 'grpc' | 'socket';
}

export interface RawWorkerOptions {
  listen?: unknown;
  role?: unknown;
  workerId?: unknown;
  session?: unknown;
  strict?: unknown;
  /** `--model <path>`, repeatable. */
  models?: unknown;
  maxMessageBytes?: unknown;
  parentWatch?: unknown;
  storeDir?: unknown;
  storeId?: unknown;
  rendezvous?: unknown;
  advertise?: unknown;
  /** `--tls-dir DIR` (a `detsim certs` directory), or the four files one by one. */
  tlsDir?: unknown;
  tlsCert?: unknown;
  tlsKey?: unknown;
  tlsCa?: unknown;
  tokenFile?: unknown;
  wire?: unknown;
}

/** A unix socket's directory must exist: gRPC would otherwise fail the bind with a raw line and a stack trace. */
function refuseMissingSocketDir(target: string): void {
  const socket = target.replace(/^unix:/, '');
  const dir = dirname(socket);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // missing or unreadable: refused below
  }
  if (!isDir)
    throw new DetsimError(
      'struct_invalid_field',
      `--listen unix:${socket}: the directory ${dir} does not exist`,
      '--listen',
    );
}

/** `--wire grpc|socket`: the socket wire only on a unix socket, and never for a worker found by rendezvous. */
function readWire(wire: unknown, kind: 'unix' | 'tcp', rendezvous: boolean): 'grpc' | 'socket' {
  if (wire !== 'grpc' && wire !== 'socket')
    throw new DetsimError(
      'struct_invalid_field',
      `--wire must be grpc or socket, not ${JSON.stringify(wire)}`,
      '--wire',
    );
  if (wire === 'socket' && (kind !== 'unix' || rendezvous))
    throw new DetsimError(
      'struct_invalid_field',
      '--wire socket is for a worker its coordinator starts on a unix socket (no TCP, no --rendezvous)',
      '--wire',
    );
  return wire;
}

/** Validate CLI options; a refusal names the flag. */
export function readWorkerOptions(raw: RawWorkerOptions): WorkerProcessOptions {
  if (typeof raw.listen !== 'string')
    throw new DetsimError('struct_missing_field', '--listen unix:/abs/path|host:port is required', '--listen');
  const tlsPaths = readTlsFlags(raw);
  const listen = parseListenAddress(raw.listen, '--listen', tlsPaths !== undefined);
  if (listen.kind === 'unix') refuseMissingSocketDir(listen.target);
  if (tlsPaths && listen.kind !== 'tcp')
    throw new DetsimError(
      'struct_invalid_field',
      '--tls-dir: TLS is for TCP workers; a unix socket is reachable only from this machine',
      '--tls-dir',
    );
  const plainToken = tlsPaths === undefined ? readPlainToken(raw) : undefined;
  if (listen.kind === 'tcp' && tlsPaths === undefined) requireSecret(raw, plainToken);
  if (raw.role !== 'agent' && raw.role !== 'environment')
    throw new DetsimError(
      'struct_invalid_field',
      `--role must be agent or environment, not ${JSON.stringify(raw.role ?? null)}`,
      '--role',
    );
  if (!isId(raw.workerId))
    throw new DetsimError(
      'struct_invalid_id',
      `--worker-id ${JSON.stringify(raw.workerId ?? null)} is not an Id`,
      '--worker-id',
    );
  if (raw.session !== undefined && !isId(raw.session))
    throw new DetsimError('struct_invalid_id', `--session ${JSON.stringify(raw.session)} is not an Id`, '--session');
  let maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES;
  if (raw.maxMessageBytes !== undefined) {
    maxMessageBytes = Number(raw.maxMessageBytes);
    if (
      !Number.isInteger(maxMessageBytes) ||
      maxMessageBytes < 2 * 1024 * 1024 ||
      maxMessageBytes > 1024 * 1024 * 1024
    ) {
      throw new DetsimError(
        'struct_invalid_field',
        '--max-message-bytes must be an integer from 2 MiB to 1 GiB (chunks are 1 MiB)',
        '--max-message-bytes',
      );
    }
  }
  const models = readModelFlags(raw.models);
  const out: WorkerProcessOptions = {
    listen: raw.listen,
    role: raw.role,
    workerId: raw.workerId,
    strict: raw.strict === true,
    models,
    maxMessageBytes,
    parentWatch: raw.parentWatch !== false,
  };
  if (typeof raw.session === 'string') out.sessionId = raw.session;
  if (raw.storeDir !== undefined) out.storeDir = readStoreDir(raw.storeDir);
  if (raw.storeId !== undefined) out.storeId = readStoreId(raw.storeId, out.storeDir);
  readRendezvousFlags(raw, out);
  if (tlsPaths) out.tls = readTlsMaterial(tlsPaths, tlsField(raw));
  if (plainToken !== undefined) out.token = plainToken;
  if (raw.wire !== undefined) out.wire = readWire(raw.wire, listen.kind, raw.rendezvous !== undefined);
  return out;
}

/** `--token-file F` alone (no TLS flag): a plaintext TCP worker's per-run secret, read and checked now. */
function readPlainToken(raw: RawWorkerOptions): string | undefined {
  if (raw.tokenFile === undefined) return undefined;
  if (typeof raw.tokenFile !== 'string' || raw.tokenFile === '')
    throw new DetsimError('struct_invalid_field', '--token-file takes a path', '--token-file');
  return readTokenFile(raw.tokenFile, '--token-file');
}

/**
 * Plaintext TCP is reachable by every local user: a worker serves it only bound to one session and
 * holding a per-run secret every stream must present (the launcher gives both; a hand-started
 * worker is given them with --session and --token-file). Unix sockets keep their 0700 directory.
 */
function requireSecret(raw: RawWorkerOptions, token: string | undefined): void {
  if (raw.session !== undefined && token !== undefined) return;
  throw new DetsimError(
    'perm_plaintext_tcp_unbound',
    `--listen: a plaintext TCP worker needs --session and --token-file (a per-run secret every stream must present; any local user can reach a loopback port); or listen on unix:/abs/path, or serve TLS (--tls-dir)`,
    '--listen',
  );
}

/** `--rendezvous DIR` (an existing directory) and `--advertise HOST:PORT` (only with it). */
function readRendezvousFlags(raw: RawWorkerOptions, out: WorkerProcessOptions): void {
  if (raw.advertise !== undefined && typeof raw.advertise !== 'string')
    throw new DetsimError('struct_invalid_field', '--advertise must be HOST:PORT', '--advertise');
  if (raw.rendezvous !== undefined) {
    const dir = requireExistingDirectory(
      raw.rendezvous,
      `--rendezvous ${JSON.stringify(raw.rendezvous)}`,
      '--rendezvous',
    );
    out.rendezvous = resolve(dir);
  }
  checkAdvertise(out.listen, out.rendezvous, raw.advertise);
  if (raw.advertise !== undefined) out.advertise = raw.advertise;
}

const TLS_FILE_FLAGS = [
  ['tlsCa', '--tls-ca'],
  ['tlsCert', '--tls-cert'],
  ['tlsKey', '--tls-key'],
  ['tokenFile', '--token-file'],
] as const;

/** The flag TLS files came from, for refusals: `--tls-dir` unless the files were named one by one. */
function tlsField(raw: RawWorkerOptions): string {
  return raw.tlsDir !== undefined ? '--tls-dir' : '--tls-cert';
}

/**
 * Where this worker's TLS files are: `--tls-dir DIR` (ca.pem, worker.pem, worker-key.pem, token),
 * each file overridable by its own flag; without --tls-dir all four file flags are needed. Undefined: no TLS.
 */
function readTlsFlags(raw: RawWorkerOptions): TlsPaths | undefined {
  const given = TLS_FILE_FLAGS.filter(([key]) => raw[key] !== undefined);
  // --token-file alone is a plaintext TCP worker's per-run secret (readPlainToken), not TLS.
  if (raw.tlsDir === undefined && given.every(([key]) => key === 'tokenFile')) return undefined;
  for (const [key, flag] of [['tlsDir', '--tls-dir'], ...TLS_FILE_FLAGS] as const) {
    const value = raw[key];
    if (value !== undefined && (typeof value !== 'string' || value === ''))
      throw new DetsimError('struct_invalid_field', `${flag} takes a path`, flag);
  }
  if (raw.tlsDir === undefined) {
    const missing = TLS_FILE_FLAGS.find(([key]) => raw[key] === undefined);
    if (missing)
      throw new DetsimError(
        'struct_missing_field',
        `${missing[1]} is required with ${given[0]![1]} (or give --tls-dir DIR made by detsim certs)`,
        missing[1],
      );
  }
  const base = raw.tlsDir === undefined ? undefined : tlsPathsIn(raw.tlsDir as string, 'worker');
  return {
    ca: (raw.tlsCa as string | undefined) ?? base!.ca,
    cert: (raw.tlsCert as string | undefined) ?? base!.cert,
    key: (raw.tlsKey as string | undefined) ?? base!.key,
    token: (raw.tokenFile as string | undefined) ?? base!.token,
  };
}

function readStoreDir(value: unknown): string {
  if (typeof value !== 'string' || !isAbsolute(value))
    throw new DetsimError(
      'struct_invalid_field',
      `--store-dir ${JSON.stringify(value)} is not an absolute path`,
      '--store-dir',
    );
  return value;
}

function readStoreId(value: unknown, storeDir: string | undefined): string {
  if (typeof value !== 'string' || !STORE_ID_PATTERN.test(value))
    throw new DetsimError('struct_invalid_field', '--store-id must be 32 lowercase hex digits', '--store-id');
  if (storeDir === undefined)
    throw new DetsimError(
      'struct_invalid_field',
      '--store-id names the token of a --store-dir; give both',
      '--store-id',
    );
  return value;
}

/**
 * The store directory this worker may use: `--store-dir`, unless `--store-id` was given and the
 * directory does not hold that token (another node's directory of the same name, or none). Then
 * the worker says so once on stderr and does not offer store-files-v1: its payloads travel as
 * attachments.
 */
function usableStoreDir(options: WorkerProcessOptions): string | undefined {
  const dir = options.storeDir;
  if (dir === undefined || options.storeId === undefined || storeHoldsId(dir, options.storeId)) return dir;
  process.stderr.write(
    `detsim worker ${options.workerId}: --store-dir ${dir} does not hold this run's store id (not the coordinator's store here); checkpoint payloads travel as attachments\n`,
  );
  return undefined;
}

/** Run until shutdown; resolves once the server is listening and the ready line is printed. */
export async function runWorkerProcess(
  options: WorkerProcessOptions,
): Promise<{ server: StartedServer; runtime: WorkerRuntime }> {
  const runtimeOptions: ConstructorParameters<typeof WorkerRuntime>[0] = {
    role: options.role,
    workerId: options.workerId,
    strict: options.strict ?? false,
    models: options.models ?? [],
    maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
  };
  if (options.sessionId) runtimeOptions.sessionId = options.sessionId;
  // A host name is judged by what it resolves to, before anything listens (named as the flag).
  await checkListenResolves(options.listen, '--listen', options.tls !== undefined);
  await refuseLiveNamesake(options);
  const storeDir = usableStoreDir(options);
  if (storeDir) runtimeOptions.storeDir = storeDir;
  const runtime = new WorkerRuntime(runtimeOptions);
  let server: StartedServer | undefined;
  // Hello-first is per stream: each Session stream starts un-introduced.
  const streams = new WeakMap<SessionConnection, StreamState>();
  const streamOf = (connection: SessionConnection): StreamState => {
    let state = streams.get(connection);
    if (!state) streams.set(connection, (state = { introduced: false }));
    return state;
  };
  let exiting = false;
  let leaveRendezvous = (): void => undefined;
  const exit = (code: number): void => {
    if (exiting) return;
    exiting = true;
    // First of all: no coordinator may find a worker that is on its way out.
    leaveRendezvous();
    const done = (): never => process.exit(code);
    if (server) void server.close().then(done, done);
    else done();
  };
  const queue = new RequestQueue(
    runtime,
    () => exit(0),
    (why) => process.stderr.write(`detsim worker ${options.workerId}: reply failed: ${why}\n`),
    true,
  );
  const handler: SessionHandler = {
    onMessage(message, connection) {
      queue.enqueue(message.body, message.attachment, streamOf(connection), (body, attachment) =>
        connection.send(replyBody(body), attachment),
      );
    },
    onProtocolError(why) {
      process.stderr.write(`detsim worker ${options.workerId}: framing error, stream ended: ${why}\n`);
    },
    // State attachments only make sense after this stream's own Hello (docs/security.md).
    mayAttach: (connection) => streamOf(connection).introduced,
    onAuthRefused(reason, why) {
      process.stderr.write(`detsim worker ${options.workerId}: [${reason}] refused ${why}\n`);
    },
  };
  server =
    options.wire === 'socket'
      ? await startSocketServer(options.listen, handler, options.maxMessageBytes)
      : await startWorkerServer(options.listen, handler, options.maxMessageBytes, options.tls, options.token);
  if (options.rendezvous !== undefined) {
    try {
      leaveRendezvous = joinRendezvous(options, server.listen);
    } catch (e) {
      // Nobody can find this worker: it stops listening and leaves (the refusal names the flag).
      await server.close();
      throw e;
    }
  }
  process.once('SIGTERM', () => exit(0));
  process.once('SIGINT', () => exit(0));
  // A terminal closed under a hand-started worker: leave as on SIGTERM (its rendezvous record goes too).
  process.once('SIGHUP', () => exit(0));
  if (options.parentWatch !== false) {
    watchParent(() => exit(0));
    // The loop above is deaf while model code blocks it; the watchdog thread is not.
    startParentWatchdog();
  }
  process.stdout.write(`${JSON.stringify({ ready: true, listen: server.listen, pid: process.pid })}\n`);
  return { server, runtime };
}

/**
 * A worker of this id whose rendezvous record is there and who answers at its address: this one
 * is refused rather than replace it (and take its record away on exit); a record nobody answers
 * at is stale (a worker that crashed) and is replaced.
 */
async function refuseLiveNamesake(options: WorkerProcessOptions): Promise<void> {
  if (options.rendezvous === undefined) return;
  const path = join(options.rendezvous, rendezvousFileName(options.workerId));
  let address: string;
  try {
    address = readRendezvousRecord(readFileSync(path), path).address;
  } catch {
    return; // no record, or not one a coordinator would read: this worker's replaces it
  }
  if (!(await answersAt(address))) return;
  throw new DetsimError(
    'ident_rendezvous_taken',
    `--worker-id ${options.workerId}: ${path} names a worker of this id that answers at ${address}; stop it first, or start this one with another --worker-id`,
    '--worker-id',
  );
}

/** Whether something accepts a connection at a rendezvous address (unix:/path or host:port) within a second. */
function answersAt(address: string): Promise<boolean> {
  const a = parseAddress(address, 'address');
  return new Promise((resolve) => {
    const socket = a.kind === 'unix' ? connect(a.path) : connect(a.port, a.host);
    const done = (up: boolean): void => {
      socket.destroy();
      resolve(up);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * Write this worker's rendezvous record (it is listening already, so a coordinator that reads it
 * can connect at once); returns what removes it again on exit. A record is physical: it names
 * where the worker is, never what it computes.
 */
function joinRendezvous(options: WorkerProcessOptions, bound: string): () => void {
  const record: RendezvousRecord = {
    format: RENDEZVOUS_FORMAT,
    workerId: options.workerId,
    role: options.role,
    address: advertisedAddress(bound, options.advertise),
    session: options.sessionId ?? null,
    contractDigest: CONTRACT_DIGEST,
    // The certificate a TLS worker presents, so the coordinator can pin it; null in plaintext.
    certificateFingerprint: options.tls ? certificateFingerprint(options.tls.cert) : null,
  };
  let path: string;
  try {
    path = writeRendezvousRecord(options.rendezvous!, record);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    throw new DetsimError(
      'perm_write_failed',
      `--rendezvous: cannot write this worker's record (${code})`,
      '--rendezvous',
    );
  }
  const written = rendezvousRecordBytes(record);
  return () => removeRendezvousRecord(path, written);
}

/** Orphan guard: leave when stdin (a pipe from the launcher) closes or the parent pid changes. */
function watchParent(onGone: () => void): void {
  let stdinIsPipe = false;
  try {
    const st = fstatSync(0);
    stdinIsPipe = st.isFIFO() || st.isSocket();
  } catch {
    stdinIsPipe = false;
  }
  if (stdinIsPipe) {
    process.stdin.on('end', onGone);
    process.stdin.on('error', onGone);
    process.stdin.resume();
  }
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid !== parent) onGone();
  }, 1000);
  timer.unref();
}
