// Test harness: spawn a real worker process (`node --import tsx workers/main.ts`) on a short
// Unix socket, wait for its ready line, connect a WorkerClient wired to its exit, and say Hello.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ChannelCredentials } from '@grpc/grpc-js';
import type { Scope } from '../../core/formats/scalars.js';
import {
  type CallReply,
  type ProcessExitInfo,
  type Reply,
  type Role,
  WorkerClient,
} from '../../core/protocol/index.js';

export const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const SESSION = 's1';
/** 60 Hz world step: 50000000/3 ns. */
export const STEP_60HZ = { numerator: '50000000', denominator: '3' };

export interface SpawnedWorker {
  proc: ChildProcess;
  listen: string;
  /** A plaintext TCP worker's per-run secret (its --token-file), which `client` presents. */
  token?: string;
  client: WorkerClient;
  exited: Promise<ProcessExitInfo>;
  readyLine: string;
  stderr: () => string;
  stop(): Promise<void>;
}

const dirs: string[] = [];
const live = new Set<SpawnedWorker>();

export async function spawnWorker(
  role: Role,
  workerId: string,
  extra: string[] = [],
  hello = true,
  listenAt?: string,
): Promise<SpawnedWorker> {
  const w = await launchWorker(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
    role,
    workerId,
    extra,
    listenAt,
  });
  if (hello) await w.client.hello({ sessionId: SESSION, workerId, role });
  return w;
}

/**
 * Start any worker binary speaking the protocol (TypeScript or Rust) with the standard flags on a
 * short Unix socket (or `listenAt`), wait for its ready line, and connect a WorkerClient wired to
 * its exit. No Hello. stopAll() stops every worker started here.
 */
export async function launchWorker(
  command: string,
  args: string[],
  opts: { role: Role; workerId: string; extra?: string[]; listenAt?: string; credentials?: ChannelCredentials },
): Promise<SpawnedWorker> {
  const dir = mkdtempSync(join(tmpdir(), 'dsw-'));
  dirs.push(dir);
  const requested = opts.listenAt ?? `unix:${join(dir, 'w.sock')}`;
  // A plaintext TCP worker is started as it must be (docs/security.md): bound to a session and
  // holding a per-run secret, which the client presents on its stream.
  const extra = opts.extra ?? [];
  const plainTcp = !requested.startsWith('unix:') && !extra.some((a) => a.startsWith('--tls'));
  const token = plainTcp ? randomBytes(32).toString('hex') : undefined;
  const secret: string[] = [];
  if (token !== undefined) {
    const file = join(dir, 'token');
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
    secret.push('--token-file', file, ...(extra.includes('--session') ? [] : ['--session', SESSION]));
  }
  const proc = spawn(
    command,
    [...args, '--listen', requested, '--role', opts.role, '--worker-id', opts.workerId, ...extra, ...secret],
    {
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<ProcessExitInfo>((res) => proc.once('exit', (code, signal) => res({ code, signal })));
  const readyLine = await new Promise<string>((res, rej) => {
    const rl = createInterface({ input: proc.stdout! });
    rl.once('line', res);
    void exited.then((i) => rej(new Error(`${command} worker exited before ready (${i.code}/${i.signal}): ${stderr}`)));
  });
  const listen = (JSON.parse(readyLine) as { listen: string }).listen; // the bound address (a real port for host:0)
  const client = await WorkerClient.connect(listen, {
    processExit: exited,
    label: opts.workerId,
    ...(opts.credentials ? { credentials: opts.credentials } : {}),
    ...(token !== undefined ? { token } : {}),
    // A worker started with `--wire socket` speaks the socket wire, as its coordinator would.
    ...(extra.join(' ').includes('--wire socket') ? { wire: 'socket' as const } : {}),
  });
  const w: SpawnedWorker = {
    proc,
    listen,
    ...(token !== undefined ? { token } : {}),
    client,
    exited,
    readyLine,
    stderr: () => stderr,
    async stop() {
      live.delete(w);
      client.close();
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
  live.add(w);
  return w;
}

export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((w) => w.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

export function scope(step: number | bigint, epoch = 'e1'): Scope {
  return { sessionId: SESSION, epoch, step: String(step) };
}

/** The result body a reply type carries (a typed reply's is its method's result, see methods.ts). */
type ResultIn<Rep> = Rep extends { type: 'result'; result: infer R } ? R : never;

/**
 * The result body of a reply, failing the test with the error if it is an error reply. Typed by the
 * method table when the call named its method (`resultOf(await client.call(METHODS.status, …))` is a
 * StatusResult); a reply of callUnchecked is a plain record unless the test names its type `T`.
 */
export function resultOf<T = never, Rep extends Reply = Reply>(
  r: CallReply<Rep> | Rep,
): [T] extends [never] ? ResultIn<Rep> : T {
  const reply = 'reply' in r ? r.reply : r;
  if (reply.type !== 'result') throw new Error(`expected a result, got ${reply.error.code}: ${reply.error.message}`);
  return reply.result as [T] extends [never] ? ResultIn<Rep> : T;
}

export function errorOf(r: CallReply): { code: string; message: string; mutation: string } {
  if (r.reply.type !== 'error')
    throw new Error(`expected an error reply, got result ${JSON.stringify(r.reply.result)}`);
  return r.reply.error;
}
