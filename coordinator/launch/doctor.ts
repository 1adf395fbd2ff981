// `detsim doctor`'s checks: for each runtime, what a run will use and what is missing, with the
// command that fixes it. Each check spawns at most one short process; nothing is installed or built.
// The core (Node and the TypeScript worker) decides the exit code; the rest is optional per run.
// NOT the run-time refusals (launcher.ts, python-runtime.ts refuse a plan that needs what is missing).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { defaultWorkerCommand, rustWorkerPath, RUST_WORKER_BUILD_COMMAND } from './launcher.js';
import { NODE_POOL_FLAG } from './node-flag.js';
import { PACKAGE_ROOT, makeVenvCommand, pythonChoice, pythonWorkerInstallCommand } from './python-runtime.js';

export interface DoctorItem {
  /** What is checked: node, typescript-worker, typescript-models, python, rust-worker, cargo, openssl, setpriv, slurm. */
  readonly item: string;
  readonly ok: boolean;
  /** Whether a run without it still works (only the Python, Rust, TLS and Slurm features need theirs). */
  readonly core: boolean;
  readonly detail: string;
  /** The command that fixes it, when not ok. */
  readonly fix?: string;
}

const run = (command: string, args: string[]) => spawnSync(command, args, { encoding: 'utf8', timeout: 30_000 });
const firstLine = (text: string | null | undefined): string => (text ?? '').trim().split('\n')[0] ?? '';

/** Whether this process got the flag the `detsim` command starts Node with (a hint when it did not). */
const poolNote = (): string =>
  process.execArgv.includes(NODE_POOL_FLAG)
    ? `, started with ${NODE_POOL_FLAG}`
    : `; not started with ${NODE_POOL_FLAG} (run \`detsim\`, not \`node …/main.js\`, for it)`;

function node(): DoctorItem {
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  const ok = major > 20 || (major === 20 && minor >= 19);
  return {
    item: 'node',
    ok,
    core: true,
    detail: `${process.execPath} v${process.versions.node} (needs >= 20.19)${poolNote()}`,
    ...(ok ? {} : { fix: 'install Node 20.19 or later' }),
  };
}

function typescriptWorker(): DoctorItem[] {
  const cmd = defaultWorkerCommand();
  const entry = cmd.args.at(-1)!;
  const ok = existsSync(entry);
  const fromSource = entry.endsWith('.ts');
  return [
    {
      item: 'typescript-worker',
      ok,
      core: true,
      detail: entry,
      ...(ok ? {} : { fix: `npm run build (in ${PACKAGE_ROOT})` }),
    },
    {
      item: 'typescript-models',
      ok: true,
      core: false,
      detail: fromSource
        ? '.js/.mjs/.cjs and .ts model modules (detsim runs from source, with tsx)'
        : '.js/.mjs/.cjs model modules; a .ts model is compiled first: npx -p typescript tsc --module nodenext --target es2022 my-model.ts',
    },
  ];
}

const PYTHON_PROBE =
  "import json, sys, numpy, detsim_worker; print(json.dumps({'version': sys.version.split()[0], 'worker': detsim_worker.__file__, 'numpy': numpy.__version__}))";

function python(): DoctorItem {
  const { python: interpreter, why } = pythonChoice();
  const r = run(interpreter, ['-c', PYTHON_PROBE]);
  const venv = makeVenvCommand();
  if (r.error)
    return {
      item: 'python',
      ok: false,
      core: false,
      detail: `${interpreter} (${why}) cannot be run`,
      fix:
        why === '$DETSIM_PYTHON'
          ? 'point DETSIM_PYTHON at python3 >= 3.10, or unset it'
          : (venv ?? 'install python3 >= 3.10'),
    };
  if (r.status !== 0)
    return {
      item: 'python',
      ok: false,
      core: false,
      detail: `${interpreter} (${why}) cannot import detsim_worker and numpy: ${firstLine(r.stderr.split('\n').filter(Boolean).at(-1))}`,
      fix: venv ?? pythonWorkerInstallCommand(interpreter),
    };
  const v = JSON.parse(r.stdout) as { version: string; worker: string; numpy: string };
  return {
    item: 'python',
    ok: true,
    core: false,
    detail: `${interpreter} (${why}): Python ${v.version}, numpy ${v.numpy}, detsim_worker from ${v.worker}`,
  };
}

function tool(item: string, command: string, args: string[], fix: string, detail = ''): DoctorItem {
  const r = run(command, args);
  const ok = !r.error && r.status === 0;
  return {
    item,
    ok,
    core: false,
    detail: ok ? `${firstLine(r.stdout || r.stderr)}${detail}` : `${command} not found${detail}`,
    ...(ok ? {} : { fix }),
  };
}

function rustWorker(): DoctorItem {
  const path = rustWorkerPath();
  const ok = existsSync(path);
  const script = join(PACKAGE_ROOT, 'scripts', 'build-rust-worker.sh');
  const fix = existsSync(script)
    ? `bash ${script}`
    : `build it in a detsim checkout (${RUST_WORKER_BUILD_COMMAND}) and set DETSIM_RUST_WORKER to the binary`;
  return {
    item: 'rust-worker',
    ok,
    core: false,
    detail: `${path}${ok ? '' : ' is missing (workers.runtime: rust needs it)'}`,
    ...(ok ? {} : { fix }),
  };
}

/** Every check, in a fixed order. */
export function doctor(): DoctorItem[] {
  return [
    node(),
    ...typescriptWorker(),
    python(),
    rustWorker(),
    tool('cargo', 'cargo', ['--version'], 'install Rust with rustup (only to build the Rust worker)'),
    tool('openssl', 'openssl', ['version'], 'apt-get install openssl (only for detsim certs / TLS workers)'),
    tool('setpriv', 'setpriv', ['--version'], 'apt-get install util-linux (workers then die with their coordinator)'),
    tool('slurm', 'sbatch', ['--version'], 'apt-get install slurm-wlm (only for launcher: slurm)'),
  ];
}

/** One line per item: `ok      item  detail` or `missing item  detail; fix: command`. */
export function formatDoctor(items: readonly DoctorItem[]): string {
  const width = Math.max(...items.map((i) => i.item.length));
  return items
    .map((i) => `${i.ok ? 'ok     ' : 'missing'} ${i.item.padEnd(width)}  ${i.detail}${i.fix ? `; fix: ${i.fix}` : ''}`)
    .join('\n');
}
