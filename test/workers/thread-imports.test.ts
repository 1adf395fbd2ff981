// Start-up: the module graph of workers/thread-main.ts (what every worker thread imports before it
// posts its ready line) reaches no gRPC package, the `detsim` command line loads only the command it
// runs, and a run on threads or on its own worker processes never loads @grpc/grpc-js at all (it is
// loaded on first use, by a gRPC channel or server: TCP, Rust, Python, hand-started workers). Walks the real source (static imports and re-exports, following relative
// paths), so a barrel import added anywhere on the worker side fails here (and in lint); the last
// case runs the built CLI and asks Node's module cache.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLI_MAIN } from '../cli-refusal.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const GRPC = /^(@grpc\/|protobufjs|@protobufjs\/)/;
/** The modules of core/protocol/ that speak gRPC (they load @grpc/grpc-js when first used). */
const GRPC_MODULES = /core\/protocol\/(grpc-service|grpc-link|server|tls|client)\.ts$/;

/** Every module file reached from `entry` by static (value) imports, and the packages they import, each with who imports it. */
function importGraph(entry: string): { files: Map<string, string | null>; packages: Map<string, string> } {
  const files = new Map<string, string | null>([[entry, null]]);
  const packages = new Map<string, string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.shift()!;
    const source = readFileSync(file, 'utf8');
    for (const m of source.matchAll(/^(import|export)\s(?!type\s)[^;]*?from\s+'([^']+)'/gms)) {
      const spec = m[2]!;
      if (!spec.startsWith('.')) {
        if (!spec.startsWith('node:') && !packages.has(spec)) packages.set(spec, file);
        continue;
      }
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      if (existsSync(target) && !files.has(target)) {
        files.set(target, file);
        queue.push(target);
      }
    }
  }
  return { files, packages };
}

function chain(files: Map<string, string | null>, from: string): string {
  const path: string[] = [];
  for (let f: string | null | undefined = from; f; f = files.get(f)) path.unshift(relative(ROOT, f));
  return path.join(' -> ');
}

describe('worker thread start-up', () => {
  it('workers/thread-main.ts reaches no gRPC module of core/protocol/ and no gRPC or protobuf package', () => {
    const { files, packages } = importGraph(join(ROOT, 'workers', 'thread-main.ts'));
    const grpc = [...packages]
      .filter(([name]) => GRPC.test(name))
      .map(([name, by]) => `${name} via ${chain(files, by)}`);
    expect(grpc).toEqual([]);
    const grpcModules = [...files.keys()].filter((f) => GRPC_MODULES.test(f)).map((f) => chain(files, f));
    expect(grpcModules).toEqual([]);
    // The walk itself works: the runtime and the envelopes are on the thread's graph.
    expect(files.has(join(ROOT, 'workers', 'runtime.ts'))).toBe(true);
    expect(files.has(join(ROOT, 'core', 'protocol', 'envelope.ts'))).toBe(true);
  });

  it('a worker process (workers/main.ts) does reach them: the walk sees what a barrel import pulls in', () => {
    const { files } = importGraph(join(ROOT, 'workers', 'main.ts'));
    expect([...files.keys()].filter((f) => GRPC_MODULES.test(f)).length).toBeGreaterThan(0);
  });

  it('the command line imports no command module statically (each is loaded when named)', () => {
    const { files } = importGraph(join(ROOT, 'coordinator', 'cli', 'main.ts'));
    const commands = [...files.keys()].filter((f) => f.endsWith('-command.ts')).map((f) => relative(ROOT, f));
    expect(commands).toEqual([]);
    expect(readFileSync(join(ROOT, 'coordinator', 'cli', 'main.ts'), 'utf8')).toContain("import('./run-command.js')");
  });

  it(
    'a run on threads or on its own worker processes (the socket wire) never loads @grpc/grpc-js; on TCP both ends do',
    { timeout: 120_000 },
    () => {
      const work = mkdtempSync(join(tmpdir(), 'detsim-grpc-lazy-'));
      try {
        // Preloaded into the CLI's process and every worker process: at exit, whether gRPC is in Node's
        // module cache, one line per process (the coordinator's first).
        const probe = join(work, 'probe.cjs');
        writeFileSync(
          probe,
          `if (require('node:worker_threads').isMainThread) process.on('exit', () => require('node:fs').appendFileSync(${JSON.stringify(join(work, 'loaded'))}, \`\${process.argv.some((a) => a.includes('workers/main')) ? 'worker' : 'cli'} \${Object.keys(require.cache).some((k) => k.includes('@grpc/grpc-js'))}\\n\`));\n`,
        );
        const run = (transport: string) => {
          rmSync(join(work, 'loaded'), { force: true });
          const r = spawnSync(
            process.execPath,
            ['--require', probe, CLI_MAIN, 'run', 'examples/forage-walkers.yaml', '--steps', '2'].concat([
              '--transport',
              transport,
              '--environment-transport',
              'workers',
              '--out',
              join(work, transport),
            ]),
            { encoding: 'utf8', cwd: ROOT, env: { ...process.env, DETSIM_WORKER_NODE_ARGS: `--require ${probe}` } },
          );
          expect(r.status, r.stderr).toBe(0);
          return readFileSync(join(work, 'loaded'), 'utf8').trim().split('\n').sort();
        };
        expect(run('thread')).toEqual(['cli false']);
        expect(run('unix')).toEqual(['cli false', 'worker false', 'worker false']);
        expect(run('tcp')).toEqual(['cli true', 'worker true', 'worker true']);
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  );
});
