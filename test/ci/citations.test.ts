// Every comment that cites a specification cites a file in this repository: each `*.md` path named
// in a source comment (TypeScript, JavaScript, Rust, Python) exists, and no comment cites the
// outside reference by its section numbers or the shared specs folder (OUTSIDE_CITATION) instead of
// the project's own pages in docs/spec/. NOT a check of prose in Markdown files or of string literals.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, extname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../workers/harness.js';

const SOURCE_DIRS = ['core', 'coordinator', 'workers', 'crates-bridge', 'test', 'bench', 'scripts', 'examples'];
const SKIP_DIRS = new Set(['node_modules', 'target', 'dist', '.venv', 'results']);
const EXTENSIONS = new Set(['.ts', '.mjs', '.js', '.rs', '.py']);
/** Files a run writes (not documents a comment can cite), by base name. */
const OUTPUT_FILES = new Set(['attestation.md']);
const OUTSIDE_CITATION = /reference §|\bspecs\/|reference-session-framework|seed spec/;

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .flatMap((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return SKIP_DIRS.has(e.name) ? [] : sourceFiles(path);
      return EXTENSIONS.has(extname(e.name)) ? [path] : [];
    });
}

/** The comment text of a source file: line comments (`//`, or `#` in Python) and block comments. */
export function commentsOf(text: string, python: boolean): string[] {
  const line = python ? /(?:^|\s)#(.*)$/gm : /(?:^|\s)\/\/(.*)$/gm;
  const comments = [...text.matchAll(line)].map((m) => m[1] ?? '');
  if (!python) comments.push(...[...text.matchAll(/\/\*([\s\S]*?)\*\//g)].map((m) => m[1] ?? ''));
  return comments;
}

/** `*.md` names in a comment, as written (`docs/spec/lockstep.md`, `README.md`). */
export function citedMarkdown(comment: string): string[] {
  return [...comment.matchAll(/(?:[\w.-]+\/)*[\w-]+\.md\b/g)].map((m) => m[0]);
}

function resolves(cited: string, file: string): boolean {
  if (OUTPUT_FILES.has(basename(cited))) return true;
  return existsSync(join(REPO_ROOT, cited)) || existsSync(join(dirname(file), cited));
}

const files = SOURCE_DIRS.flatMap((d) => sourceFiles(join(REPO_ROOT, d)));

describe('specification citations', () => {
  it('the scan sees the sources and their citations (guards against a scanner that finds nothing)', () => {
    expect(files.length).toBeGreaterThan(100);
    const seedText = readFileSync(join(REPO_ROOT, 'core/formats/seed.ts'), 'utf8');
    const seed = commentsOf(seedText, false).flatMap(citedMarkdown);
    expect(seed).toContain('docs/spec/seed-derivation.md');
  });

  it('every *.md file a source comment cites exists in the repository', () => {
    const missing = files.flatMap((file) =>
      commentsOf(readFileSync(file, 'utf8'), extname(file) === '.py')
        .flatMap(citedMarkdown)
        .filter((cited) => !resolves(cited, file))
        .map((cited) => `${relative(REPO_ROOT, file)}: ${cited}`),
    );
    expect(missing).toEqual([]);
  });

  it('no comment cites the outside reference by section instead of docs/spec/', () => {
    const outside = files.flatMap((file) =>
      commentsOf(readFileSync(file, 'utf8'), extname(file) === '.py')
        .filter((c) => OUTSIDE_CITATION.test(c))
        .map((c) => `${relative(REPO_ROOT, file)}: ${c.trim()}`),
    );
    expect(outside).toEqual([]);
  });

  it('a cited page that does not exist is caught', () => {
    const comments = commentsOf("// see docs/spec/no-such-page.md\nconst url = 'http://x/a.md';\n", false);
    const unresolved = comments.flatMap(citedMarkdown).filter((c) => !resolves(c, join(REPO_ROOT, 'core/x.ts')));
    expect(unresolved).toEqual(['docs/spec/no-such-page.md']);
  });
});
