// A user model's identity by content, not by path (issue #27): a TypeScript/JavaScript model module
// is `module:<file name>@sha256:<digest>`, the same for the same files in any directory or on any
// machine, different when any of them changes. The digest is the SHA-256 of the file's bytes for a
// module that imports no file of its own; a module that does (a relative specifier: `./policy.js`,
// `../lib/util.js`, a literal `import()` or `require()`) is identified with every file it reaches
// that way, as the SHA-256 of their listing (docs/spec/model-identity.md). run.json and the receipt
// record this identity (the module's absolute path is the physical `modelPath`), workers hash it into
// the profile digest, and resume/replay find the module again by name and digest.
// NOT model loading (workers/models/registry.ts) and NOT the plan (coordinator/config.ts).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Lexer from 'es-module-lexer/js';

const IDENTITY = /^module:([^/\\@]+)@sha256:([0-9a-f]{64})$/;

const sha256 = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');

const RELATIVE = /^\.{1,2}\//;
/** `require('./x')` with a literal relative specifier (CommonJS; what tsc emits for an import). */
const REQUIRE = /\brequire\s*\(\s*(['"])(\.{1,2}\/[^'"\n]*)\1\s*\)/g;

const isFile = (path: string): boolean => existsSync(path) && statSync(path).isFile();

/** A quoted string that starts as a relative specifier: without one, a file imports none of its own. */
const MAY_IMPORT_OWN = /['"`]\.{1,2}\//;

let lexer: typeof Lexer | undefined;
/** es-module-lexer (its synchronous asm.js build), loaded on first use: a worker hosting only built-in models never pays for it. */
const lexerOf = (): typeof Lexer => (lexer ??= createRequire(import.meta.url)('es-module-lexer/js') as typeof Lexer);

/** What `file` (source `text`) imports with a literal relative specifier: the files found, and those not there. */
function localImports(file: string, text: string): { found: string[]; missing: string[]; unloadable: string[] } {
  const out = { found: [] as string[], missing: [] as string[], unloadable: [] as string[] };
  if (!MAY_IMPORT_OWN.test(text)) return out;
  let imports: ReturnType<typeof Lexer.parse>[0] = [];
  try {
    imports = lexerOf().parse(text, file)[0];
  } catch {
    // Not ES module syntax the lexer reads (a syntax error is the worker's to report on import).
  }
  for (const i of imports) {
    if (i.type === 'import-meta' || i.specifier === undefined || !RELATIVE.test(i.specifier)) continue;
    if (i.type === 'dynamic' ? i.glob || i.probablyTypeOnly : i.typeOnly) continue;
    const path = fileURLToPath(new URL(i.specifier, pathToFileURL(file)));
    if (isFile(path)) out.found.push(path);
    else {
      out.missing.push(path);
      // A static import that is not there fails the module's import for certain (unless tsx maps
      // ./x.js to the ./x.ts beside it, from source).
      if (i.type !== 'dynamic' && !isFile(path.replace(/\.([mc]?)js$/, '.$1ts'))) out.unloadable.push(path);
    }
  }
  const req = createRequire(file);
  for (const m of text.matchAll(REQUIRE)) {
    try {
      out.found.push(req.resolve(m[2]!));
    } catch {
      out.missing.push(resolve(dirname(file), m[2]!));
    }
  }
  return out;
}

/** A model module's files: it and every file it reaches through relative imports (each once, entry first), and the imports not found. */
export interface ModuleGraph {
  files: { path: string; digest: string }[];
  /** Absolute paths a relative import names that are no file (the worker's import fails on them). */
  missing: string[];
  /** Those of them named by a static import or re-export: the module cannot be imported at all. */
  unloadable: string[];
}

export function moduleGraph(entry: string): ModuleGraph {
  const seen = new Map<string, string>();
  const missing = new Set<string>();
  const unloadable = new Set<string>();
  const pending = [resolve(entry)];
  while (pending.length > 0) {
    const path = pending.pop()!;
    if (seen.has(path)) continue;
    const bytes = readFileSync(path);
    seen.set(path, sha256(bytes));
    if (/\.(?:json|node|wasm)$/.test(path)) continue;
    const imports = localImports(path, bytes.toString('utf8'));
    pending.push(...imports.found.reverse());
    for (const m of imports.missing) missing.add(m);
    for (const m of imports.unloadable) unloadable.add(m);
  }
  const files = [...seen].map(([path, digest]) => ({ path, digest }));
  return { files, missing: [...missing].sort(), unloadable: [...unloadable].sort() };
}

/** The model module at `entry` and every file it reaches through relative imports, each once, entry first. */
export function moduleFiles(entry: string): { path: string; digest: string }[] {
  return moduleGraph(entry).files;
}

/**
 * The digest of the model module at `path`: its file's SHA-256 when it imports no file of its own,
 * else the SHA-256 of `<path>\t<sha256>\n` for it and each file it reaches, `<path>` relative to
 * the module's directory with `/` separators, sorted by code unit.
 */
export function moduleDigest(path: string): string {
  return digestOf(path, moduleFiles(path));
}

function digestOf(path: string, files: ModuleGraph['files']): string {
  if (files.length === 1) return files[0]!.digest;
  const lines = files
    .map((f) => `${posixRelative(path, f.path)}\t${f.digest}\n`)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sha256(lines.join(''));
}

/** The path-free identity of the model module at `path` (and the files it imports). */
export function moduleIdentity(path: string): string {
  return `module:${basename(path)}@sha256:${moduleDigest(path)}`;
}

/** A module identity's file name and digest, or null for anything else (a built-in, a path, python:…). */
export function parseModuleIdentity(model: string): { name: string; digest: string } | null {
  const m = IDENTITY.exec(model);
  return m ? { name: m[1]!, digest: m[2]! } : null;
}

/** Where a module model was looked for, and what was found there. */
export interface ModuleSearch {
  /** The absolute path of the module with the identity's name and digest, or null. */
  readonly path: string | null;
  /**
   * Modules with the identity's name whose digest differs (the model source changed): how many
   * files the digest covers, and the relative imports not found beside it (as specifiers from it).
   */
  readonly changed: readonly { path: string; digest: string; files: number; missing: string[] }[];
  readonly looked: readonly string[];
}

/** Find the module of an identity: `first` (its recorded path), then `<dir>/<name>` for each dir. */
export function findModule(model: string, first: string | undefined, dirs: readonly string[]): ModuleSearch {
  const id = parseModuleIdentity(model);
  if (id === null) return { path: null, changed: [], looked: [] };
  const candidates = [...new Set([...(first ? [resolve(first)] : []), ...dirs.map((d) => resolve(join(d, id.name)))])];
  const changed: ModuleSearch['changed'][number][] = [];
  for (const path of candidates) {
    if (!isFile(path)) continue;
    const graph = moduleGraph(path);
    const digest = digestOf(path, graph.files);
    if (digest === id.digest) return { path, changed, looked: candidates };
    changed.push({ path, digest, files: graph.files.length, missing: asSpecifiers(path, graph.missing) });
  }
  return { path: null, changed, looked: candidates };
}

/** Absolute paths as relative specifiers from the module at `from` (`./lib/a.js`, `../b.js`). */
export function asSpecifiers(from: string, paths: readonly string[]): string[] {
  return paths.map((p) => {
    const rel = posixRelative(from, p);
    return rel.startsWith('../') ? rel : `./${rel}`;
  });
}

/** `path` relative to the directory of the module at `from`, with `/` separators. */
function posixRelative(from: string, path: string): string {
  return relative(dirname(resolve(from)), path)
    .split(sep)
    .join('/');
}
