// Every link in the front door and the guides resolves (#29 item 4): README.md, CONTRIBUTING.md,
// docs/*.md and the workers' and bench READMEs. A relative link must name a file or directory that
// exists, and a `#fragment` a heading of its target (GitHub's slugs: lower case, punctuation dropped,
// spaces to hyphens, a repeated heading numbered). External links (http, mailto) are not fetched.
// The checker is itself tested on a broken link and a broken anchor.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../workers/harness.js';

/** The documents checked: the front door and every guide a newcomer is sent to from it. */
function documents(): string[] {
  const docs = readdirSync(join(REPO_ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f));
  return [
    'README.md',
    'CONTRIBUTING.md',
    'workers/README.md',
    'workers/python/README.md',
    'crates-bridge/README.md',
    'bench/README.md',
    ...docs,
  ];
}

/** GitHub's anchor for each heading of a markdown text (code fences skipped). */
export function headingSlugs(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const base = m[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The broken links of one document (file relative to the repository), as readable lines. */
export function brokenLinks(file: string, root = REPO_ROOT): string[] {
  const text = readFileSync(join(root, file), 'utf8').replace(/```[\s\S]*?```/g, '');
  const broken: string[] = [];
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^(https?|mailto):/.test(target)) continue;
    const [path, fragment] = target.split('#') as [string, string | undefined];
    const full = path === '' ? join(root, file) : resolve(join(root, dirname(file)), path);
    if (!existsSync(full)) {
      broken.push(`${file}: ${target}: no ${relative(root, full)}`);
      continue;
    }
    if (fragment === undefined || statSync(full).isDirectory()) continue;
    if (!headingSlugs(readFileSync(full, 'utf8')).has(fragment))
      broken.push(`${file}: ${target}: no heading #${fragment} in ${relative(root, full)}`);
  }
  return broken;
}

describe('documentation links', () => {
  it('every relative link and anchor in README.md, CONTRIBUTING.md, docs/ and the READMEs resolves', () => {
    const files = documents();
    expect(files).toContain('docs/guide.md');
    expect(files.flatMap((f) => brokenLinks(f))).toEqual([]);
  });

  it('the checker finds a missing file and a missing heading (control)', () => {
    const root = join(REPO_ROOT, 'test', 'ci', 'fixtures', 'doc-links');
    expect(brokenLinks('broken.md', root)).toEqual([
      'broken.md: missing.md: no missing.md',
      'broken.md: target.md#no-such-heading: no heading #no-such-heading in target.md',
    ]);
    expect(headingSlugs('# Remote workers (TLS)\n## A, b: c!\n## A, b: c!\n')).toEqual(
      new Set(['remote-workers-tls', 'a-b-c', 'a-b-c-1']),
    );
  });
});
