// `detsim worker`: run one worker process (agents or the environment) on a Unix socket or TCP
// address. Only flag handling lives here; the process is workers/process.ts.
import type { Command } from 'commander';
import { readWorkerOptions, runWorkerProcess } from '../../workers/process.js';
import { action } from './common.js';

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description('run a worker process (prints one ready line {"ready":true,"listen":...,"pid":...} on stdout)')
    .requiredOption(
      '--listen <address>',
      'unix:/abs/path (under 100 bytes), a loopback host:port (127.0.0.0/8, ::1, localhost), or any host:port with TLS',
    )
    .requiredOption('--role <role>', 'agent or environment')
    .requiredOption('--worker-id <id>', "this worker's Id (Hello must name it)")
    .option('--session <id>', 'bind to this session id up front')
    .option(
      '--model <path>',
      'a model module this worker may load (repeatable); any other module path is refused',
      (path: string, all: string[]) => [...all, path],
      [] as string[],
    )
    .option('--strict', 'strict mode for user models (Math.random, Date.now, new Date() throw)')
    .option('--max-message-bytes <n>', 'gRPC message size limit on both directions (default 8 MiB)')
    .option('--no-parent-watch', 'keep running when the parent process goes away')
    .option(
      '--store-dir <path>',
      "the run's checkpoint store: the only directory State.StageRestore payload files may be read from",
    )
    .option(
      '--store-id <token>',
      "the token in <store-dir>/store-id: without it there, the worker does not use --store-dir (another node's directory of that name)",
    )
    .option('--rendezvous <dir>', "once listening, write this worker's record into this directory (removed on exit)")
    .option('--advertise <host:port>', 'the address the rendezvous record announces (port 0: the bound port)')
    .option(
      '--tls-dir <dir>',
      'mutual TLS + bearer token from a `detsim certs` directory (ca.pem, worker.pem, worker-key.pem, token)',
    )
    .option('--tls-ca <file>', "the run's CA certificate (overrides --tls-dir's)")
    .option('--tls-cert <file>', "this worker's certificate (overrides --tls-dir's)")
    .option('--tls-key <file>', "this worker's private key (overrides --tls-dir's)")
    .option(
      '--token-file <file>',
      "the run's bearer token (overrides --tls-dir's); alone, a plaintext TCP worker's per-run secret",
    )
    .action(action((opts: WorkerFlags) => runWorker(opts)));
}

/** The flags as commander gives them (`--model` collected, `--no-parent-watch` as parentWatch). */
interface WorkerFlags {
  listen: string;
  role: string;
  workerId: string;
  session?: string;
  model: string[];
  strict?: boolean;
  maxMessageBytes?: string;
  parentWatch: boolean;
  storeDir?: string;
  storeId?: string;
  rendezvous?: string;
  advertise?: string;
  tlsDir?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  tokenFile?: string;
}

async function runWorker(opts: WorkerFlags): Promise<void> {
  const { model, strict, ...rest } = opts;
  await runWorkerProcess(readWorkerOptions({ ...rest, models: model, strict: strict === true }));
}
