// D6: scripts/check-goldens.mjs refuses a golden change without [golden] in the commit subject,
// in a full clone, in a shallow clone, and with an explicit range. Real git repositories in tmp.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const SCRIPT = join(process.cwd(), 'scripts', 'check-goldens.mjs');
const ENV = { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.invalid', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.invalid', DETSIM_GOLDEN_RANGE: '' };
delete (ENV as Record<string, string | undefined>).DETSIM_GOLDEN_RANGE;

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: ENV, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function commit(repo: string, file: string, text: string, subject: string): void {
  mkdirSync(join(repo, file, '..'), { recursive: true });
  writeFileSync(join(repo, file), text);
  git(repo, 'add', file);
  git(repo, 'commit', '-q', '-m', subject);
}

function check(cwd: string, range?: string) {
  return spawnSync(process.execPath, [SCRIPT, ...(range ? [range] : [])], { cwd, env: ENV, encoding: 'utf8' });
}

function repoWithHistory(unmarked: boolean): string {
  const repo = mkdtempSync(join(tmpdir(), 'detsim-golden-'));
  git(repo, 'init', '-q', '-b', 'main');
  commit(repo, 'README.md', 'x\n', 'first');
  commit(repo, 'fixtures/golden/a.json', '{"reproHash":"0000000000000000"}\n', '[golden] freeze a');
  commit(repo, 'src.ts', '1\n', 'code');
  commit(repo, 'fixtures/golden/a.json', '{"reproHash":"1111111111111111"}\n', unmarked ? 'refactor something' : 'walker v2 [golden]');
  commit(repo, 'src.ts', '2\n', 'more code');
  return repo;
}

describe('check-goldens (D6)', () => {
  it('D6: a golden change without [golden] in the subject is refused (exit 1, names the commit)', () => {
    const r = check(repoWithHistory(true));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/\[audit_golden_unmarked\] [0-9a-f]{12} "refactor something" changes fixtures\/golden\/a\.json without \[golden\]/);
  });

  it('D6: golden changes that carry [golden] pass; the whole history is the default range', () => {
    const r = check(repoWithHistory(false));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/5 commit\(s\) in HEAD, 2 change fixtures\/golden\/, all marked \[golden\]/);
  });

  it('an explicit range checks only that range', () => {
    const repo = repoWithHistory(true);
    expect(check(repo, 'HEAD~1..HEAD').status).toBe(0); // the offending commit is outside
    expect(check(repo, 'HEAD~2..HEAD').status).toBe(1);
  });

  it('works in a shallow clone: the boundary commit is skipped, later commits are checked', () => {
    const src = repoWithHistory(true);
    const shallow = mkdtempSync(join(tmpdir(), 'detsim-shallow-'));
    git(shallow, 'clone', '-q', '--depth', '1', `file://${src}`, 'c');
    const r = check(join(shallow, 'c'));
    expect(r.status, r.stderr).toBe(0); // boundary commit shows the whole tree as added; not blamed
    const deeper = mkdtempSync(join(tmpdir(), 'detsim-shallow-'));
    git(deeper, 'clone', '-q', '--depth', '3', `file://${src}`, 'c');
    const r2 = check(join(deeper, 'c'));
    expect(r2.status).toBe(1); // the unmarked change is inside the fetched history
  });

  it('outside a git checkout it passes and says why', () => {
    const r = check(mkdtempSync(join(tmpdir(), 'detsim-nogit-')));
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/not a git checkout/);
  });
});
