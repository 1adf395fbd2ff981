// Where a model module failed to import, for the one line a researcher reads: Node 20 gives an ES
// module's SyntaxError no file or line, so each file of the module (it and the files it imports,
// core/models/identity.ts moduleGraph) is checked with `node --check` and the first that fails is
// named as `<file>:<line>`; an error thrown at a module's top level is placed at the first frame of
// its stack inside those files. Runs only after an import failed. NOT model resolution (registry.ts).
import { spawnSync } from 'node:child_process';
import { basename, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { moduleGraph } from '../../core/models/identity.js';

/** `err` from importing the module at `path`, with where it happened (`policy.js:12: SyntaxError: …`). */
export function importFailure(path: string, err: unknown): Error {
  const e = err instanceof Error ? err : new Error(String(err));
  const files = moduleFiles(path);
  const name = (file: string) => relative(dirname(path), file) || basename(file);
  const at = e instanceof SyntaxError ? syntaxErrorLine(files) : thrownAt(e, files);
  const where = at === undefined ? '' : `${name(at.file)}:${at.line}: `;
  return new Error(`${where}${e.name}: ${e.message}`);
}

function moduleFiles(path: string): string[] {
  try {
    return moduleGraph(path).files.map((f) => f.path);
  } catch {
    return [path];
  }
}

/** The first of `files` whose syntax `node --check` refuses, with the line it names. */
function syntaxErrorLine(files: readonly string[]): { file: string; line: number } | undefined {
  for (const file of files) {
    const r = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 30_000 });
    if (r.status === 0) continue;
    const m = /^(.*):(\d+)$/m.exec(r.stderr ?? '');
    if (m && m[1] === file) return { file, line: Number(m[2]) };
  }
  return undefined;
}

/** The first frame of `e`'s stack in one of `files` (file URLs or paths), with its line. */
function thrownAt(e: Error, files: readonly string[]): { file: string; line: number } | undefined {
  for (const m of (e.stack ?? '').matchAll(/(file:\/\/[^\s():]+|\/[^\s():]+):(\d+):\d+/g)) {
    const file = m[1]!.startsWith('file://') ? fileURLToPath(m[1]!) : m[1]!;
    if (files.includes(file)) return { file, line: Number(m[2]) };
  }
  return undefined;
}
