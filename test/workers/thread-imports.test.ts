// A worker thread's start-up: the module graph of workers/thread-main.ts (what every worker thread
// imports before it posts its ready line) reaches no gRPC package, and the `detsim` command line
// loads only the command it runs. Walks the real source (static imports and re-exports, following
// relative paths), so a barrel import added anywhere on the worker side fails here (and in lint).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const GRPC = /^(@grpc\/|protobufjs|@protobufjs\/)/;

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
  it('workers/thread-main.ts reaches no gRPC or protobuf package (a thread never loads them)', () => {
    const { files, packages } = importGraph(join(ROOT, 'workers', 'thread-main.ts'));
    const grpc = [...packages]
      .filter(([name]) => GRPC.test(name))
      .map(([name, by]) => `${name} via ${chain(files, by)}`);
    expect(grpc).toEqual([]);
    // The walk itself works: the runtime and the envelopes are on the thread's graph.
    expect(files.has(join(ROOT, 'workers', 'runtime.ts'))).toBe(true);
    expect(files.has(join(ROOT, 'core', 'protocol', 'envelope.ts'))).toBe(true);
  });

  it('a worker process (workers/main.ts) does reach gRPC: the walk sees what a barrel import pulls in', () => {
    const { packages } = importGraph(join(ROOT, 'workers', 'main.ts'));
    expect([...packages.keys()].filter((name) => GRPC.test(name))).toContain('@grpc/grpc-js');
  });

  it('the command line imports no command module statically (each is loaded when named)', () => {
    const { files } = importGraph(join(ROOT, 'coordinator', 'cli', 'main.ts'));
    const commands = [...files.keys()].filter((f) => f.endsWith('-command.ts')).map((f) => relative(ROOT, f));
    expect(commands).toEqual([]);
    expect(readFileSync(join(ROOT, 'coordinator', 'cli', 'main.ts'), 'utf8')).toContain("import('./run-command.js')");
  });
});
