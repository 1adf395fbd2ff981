// The Python side of the peers bench: creates bench/.venv with `python3 -m venv`, installs the
// pinned requirements.txt from PyPI, and probes which peer modules import at their pinned version.
// NOT run by npm install or by the tests' own setup: only the bench calls it. Never invents a peer.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PEERS_DIR = dirname(fileURLToPath(import.meta.url));
/** bench/.venv; DETSIM_PEERS_VENV points elsewhere (the tests use it to stand for a machine without the peers). */
export const VENV_DIR = process.env.DETSIM_PEERS_VENV
  ? resolve(process.env.DETSIM_PEERS_VENV)
  : resolve(PEERS_DIR, '..', '.venv');
export const REQUIREMENTS = join(PEERS_DIR, 'requirements.txt');
const REPO_ROOT = resolve(PEERS_DIR, '..', '..');
const INSTALL_TIMEOUT_MS = 10 * 60_000;

/** A path as the receipt shows it: relative to the repository, so receipts do not name the checkout. */
export function shown(path: string): string {
  const rel = relative(REPO_ROOT, path);
  return rel.startsWith('..') ? path : rel;
}

/** A peer module's state: the version that imported, or why it is not there. */
export type ModuleProbe = { version: string } | { unavailable: string };

export interface PythonEnv {
  /** The venv's interpreter, or null when there is none to run. */
  python: string | null;
  /** What the setup did: 'existing' venv, 'created' now, or 'absent' (quick mode never installs). */
  setup: 'existing' | 'created' | 'absent' | 'failed';
  /** Setup notes in order (commands run, their failures), for the receipt. */
  notes: string[];
  modules: Record<string, ModuleProbe>;
}

export interface ExecResult {
  ok: boolean;
  stdout: string;
  stderr: string;
  /** Why it failed: exit code, signal, timeout or spawn error. */
  failure: string;
}

/** Run a command with a deadline; never throws (the caller reports the failure). */
export function run(cmd: string, args: readonly string[], timeoutMs: number, cwd?: string): Promise<ExecResult> {
  return new Promise((done) => {
    execFile(
      cmd,
      args,
      { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, cwd, env: process.env },
      (error, stdout, stderr) => {
        if (!error) return done({ ok: true, stdout, stderr, failure: '' });
        const e = error as NodeJS.ErrnoException & { killed?: boolean; signal?: string | null; code?: number | string };
        const failure =
          e.code === 'ENOENT'
            ? `${cmd} not found`
            : e.killed
              ? `${cmd} timed out after ${timeoutMs} ms`
              : e.signal
                ? `${cmd} killed by ${e.signal}`
                : `${cmd} exited ${String(e.code)}`;
        done({ ok: false, stdout, stderr, failure });
      },
    );
  });
}

/** The last non-empty line of a tool's stderr: pip and python put the cause there. */
export function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  return lines.at(-1) ?? '';
}

/** The pinned `name==version` lines of requirements.txt, keyed by lowercase name. */
export function readPins(file = REQUIREMENTS): Record<string, string> {
  const pins: Record<string, string> = {};
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') continue;
    const m = /^([A-Za-z0-9_.-]+)==([^\s;]+)$/.exec(line);
    if (!m) throw new Error(`${file}: "${line}" is not an exact name==version pin`);
    pins[m[1]!.toLowerCase()] = m[2]!;
  }
  return pins;
}

export function venvPython(venvDir = VENV_DIR): string {
  return join(venvDir, 'bin', 'python');
}

/** Import each module in the venv and compare its version with the pin. */
export async function probeModules(
  python: string,
  modules: readonly string[],
  pins: Record<string, string>,
): Promise<Record<string, ModuleProbe>> {
  const script = [
    'import importlib, json, sys',
    'out = {}',
    'for name in sys.argv[1:]:',
    '    try:',
    '        out[name] = {"version": importlib.import_module(name).__version__}',
    '    except Exception as e:',
    '        out[name] = {"unavailable": f"import {name} failed: {type(e).__name__}: {e}"}',
    'print(json.dumps(out))',
  ].join('\n');
  const r = await run(python, ['-c', script, ...modules], 60_000);
  const result: Record<string, ModuleProbe> = {};
  if (!r.ok) {
    for (const m of modules) result[m] = { unavailable: `${r.failure}: ${lastLine(r.stderr)}` };
    return result;
  }
  const parsed = JSON.parse(lastLine(r.stdout)) as Record<string, ModuleProbe>;
  for (const m of modules) {
    const probe = parsed[m] ?? { unavailable: `import ${m}: no answer from the probe` };
    const pin = pins[m.toLowerCase()];
    if ('version' in probe && pin !== undefined && probe.version !== pin) {
      result[m] = {
        unavailable: `${m} ${probe.version} is installed in ${shown(VENV_DIR)}, the pin is ${pin} (run the full bench to reinstall)`,
      };
    } else {
      result[m] = probe;
    }
  }
  return result;
}

export interface PrepareOptions {
  /** Quick mode never creates or installs: an absent venv makes every peer unavailable. */
  quick: boolean;
  modules: readonly string[];
  venvDir?: string;
  requirements?: string;
  python3?: string;
}

/** Make sure the venv exists with the pins installed (full mode), then probe the peer modules. */
export async function preparePythonEnv(opts: PrepareOptions): Promise<PythonEnv> {
  const venvDir = opts.venvDir ?? VENV_DIR;
  const requirements = opts.requirements ?? REQUIREMENTS;
  const python = venvPython(venvDir);
  const notes: string[] = [];
  const unavailableAll = (why: string): Record<string, ModuleProbe> =>
    Object.fromEntries(opts.modules.map((m) => [m, { unavailable: why }]));
  const pins = readPins(requirements);
  let setup: PythonEnv['setup'] = existsSync(python) ? 'existing' : 'absent';

  if (opts.quick) {
    if (setup === 'absent') {
      const why = `${shown(venvDir)} is absent and --quick does not install it (the full \`npm run bench -- peers\` creates it)`;
      notes.push(why);
      return { python: null, setup, notes, modules: unavailableAll(why) };
    }
    notes.push(`quick: using the existing ${shown(venvDir)} without installing`);
    return { python, setup, notes, modules: await probeModules(python, opts.modules, pins) };
  }

  if (setup === 'absent') {
    const py3 = opts.python3 ?? 'python3';
    notes.push(`${py3} -m venv ${shown(venvDir)}`);
    const made = await run(py3, ['-m', 'venv', venvDir], 120_000);
    if (!made.ok) {
      const why = `creating the venv failed: ${made.failure}: ${lastLine(made.stderr)}`;
      notes.push(why);
      return { python: null, setup: 'failed', notes, modules: unavailableAll(why) };
    }
    setup = 'created';
  }
  const pipArgs = ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '-q', '-r', requirements];
  notes.push(`${shown(python)} ${pipArgs.map(shown).join(' ')}`);
  const installed = await run(python, pipArgs, INSTALL_TIMEOUT_MS);
  const modules = await probeModules(python, opts.modules, pins);
  if (!installed.ok) {
    const why = `pip install failed: ${installed.failure}: ${lastLine(installed.stderr)}`;
    notes.push(why);
    // Whatever did not import is unavailable because of the failed install; say that, not only "import failed".
    for (const [m, p] of Object.entries(modules)) {
      if ('unavailable' in p) modules[m] = { unavailable: `${why}; ${p.unavailable}` };
    }
  }
  return { python, setup, notes, modules };
}

/** Run a peer script in the venv and parse the one JSON line it prints last. */
export async function runPeerScript(
  python: string,
  script: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ ok: true; value: unknown } | { ok: false; reason: string }> {
  const r = await run(python, [join(PEERS_DIR, script), ...args], timeoutMs);
  if (!r.ok) return { ok: false, reason: `${script} failed: ${r.failure}: ${lastLine(r.stderr)}` };
  try {
    return { ok: true, value: JSON.parse(lastLine(r.stdout)) };
  } catch {
    return {
      ok: false,
      reason: `${script} printed no JSON line (last line: ${JSON.stringify(lastLine(r.stdout)).slice(0, 200)})`,
    };
  }
}
