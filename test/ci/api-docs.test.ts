// The public API is a deliberate, documented surface: `npm run docs` (TypeDoc over `detsim` =
// coordinator/index.ts and `detsim/sdk` = workers/sdk.ts, typedoc.json) succeeds with warnings as
// errors, refuses an exported signature that names an unexported type, and every export (function,
// class, constant, type) of the two entry points carries a TSDoc comment, and the user guide's
// Library section names only what `detsim` exports. NOT a check of the rendered HTML (docs/api/
// is generated and not committed).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../workers/harness.js';

const ENTRY_POINTS = ['coordinator/index.ts', 'workers/sdk.ts'];
const NO_COLOR = { ...process.env, NO_COLOR: '1' };
const out = mkdtempSync(join(tmpdir(), 'detsim-api-docs-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

function typedoc(args: string[]): { status: number | null; output: string } {
  const bin = join(REPO_ROOT, 'node_modules', 'typedoc', 'bin', 'typedoc');
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: REPO_ROOT, encoding: 'utf8', env: NO_COLOR });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** Exports (functions, classes, constants, types) of an entry point that have no TSDoc comment. */
function undocumentedValues(program: ts.Program, entry: string): string[] {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(join(REPO_ROOT, entry));
  if (!source) throw new Error(`${entry} is not in the program`);
  const moduleSymbol = checker.getSymbolAtLocation(source);
  if (!moduleSymbol) throw new Error(`${entry} is not a module`);
  const missing: string[] = [];
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    if (symbol.getDocumentationComment(checker).length === 0) missing.push(`${entry}: ${exported.name}`);
  }
  return missing;
}

/** Names the user guide's Library section imports from 'detsim' or lists in its table (backquoted identifiers). */
function readmeLibraryNames(): string[] {
  const guide = readFileSync(join(REPO_ROOT, 'docs', 'guide.md'), 'utf8');
  const start = guide.indexOf('## Library\n');
  const next = guide.indexOf('\n## ', start + 1);
  const section = guide.slice(start, next === -1 ? undefined : next);
  const imported = [...section.matchAll(/import \{([^}]*)\} from 'detsim'/g)].flatMap((m) => (m[1] ?? '').split(','));
  const isBodyRow = (l: string) => l.startsWith('| ') && !l.startsWith('| group') && !l.startsWith('| ---');
  const namesIn = (cell: string) => [...cell.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)].map((m) => m[1] ?? '');
  const listed = section
    .split('\n')
    .filter(isBodyRow)
    .flatMap((l) => namesIn(l.split('|')[2] ?? ''));
  return [...new Set([...imported, ...listed].map((n) => n.trim()).filter((n) => n !== ''))].sort();
}

function exportedNames(program: ts.Program, entry: string): Set<string> {
  const checker = program.getTypeChecker();
  const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(join(REPO_ROOT, entry))!)!;
  return new Set(checker.getExportsOfModule(moduleSymbol).map((s) => s.name));
}

const program = ts.createProgram(
  ENTRY_POINTS.map((e) => join(REPO_ROOT, e)),
  {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
  },
);

describe('API docs', () => {
  it('npm run docs builds both entry points with warnings as errors', () => {
    const args = ['run', '--silent', 'docs', '--', '--out', out];
    const r = spawnSync('npm', args, { cwd: REPO_ROOT, encoding: 'utf8', env: NO_COLOR });
    expect(`${r.stdout}${r.stderr}`).not.toMatch(/warning|error/i);
    expect(r.status).toBe(0);
  }, 120_000);

  it('an exported signature that names an unexported type fails the docs build', () => {
    const r = typedoc(['--options', 'test/ci/fixtures/typedoc.leaky.json', '--out', join(out, 'leaky')]);
    expect(r.output).toMatch(/Hidden, defined in .* is referenced by .*leak.* but not included in the documentation/);
    expect(r.status).not.toBe(0);
  }, 60_000);

  it('every export of detsim and detsim/sdk (function, class, constant, type) has a TSDoc comment', () => {
    expect(ENTRY_POINTS.flatMap((e) => undocumentedValues(program, e))).toEqual([]);
  }, 60_000);

  it("every name the README's Library section shows is exported by detsim", () => {
    const names = readmeLibraryNames();
    expect(names).toContain('runSession');
    const exported = exportedNames(program, 'coordinator/index.ts');
    expect(names.filter((n) => !exported.has(n))).toEqual([]);
  }, 60_000);
});
