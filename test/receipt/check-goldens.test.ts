// D6: scripts/check-goldens.mjs refuses a golden change without [golden] in the commit subject,
// in a full clone and with an explicit range; it never checks less than it says: a shallow clone
// without a range, a range past the fetched history, or a bad range fails loudly
// ([meta_golden_history_incomplete]). Real git repositories in tmp.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { goldenMarkerCheck } from '../../coordinator/diff0/verify.js';

const SCRIPT = join(process.cwd(), 'scripts', 'check-goldens.mjs');
const ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@example.invalid',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@example.invalid',
  DETSIM_GOLDEN_RANGE: '',
};
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

function check(cwd: string, range?: string, extra: { env?: Record<string, string>; args?: string[] } = {}) {
  return spawnSync(process.execPath, [SCRIPT, ...(range ? [range] : []), ...(extra.args ?? [])], {
    cwd,
    env: { ...ENV, ...extra.env },
    encoding: 'utf8',
  });
}

function shallowClone(src: string, depth: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-shallow-'));
  git(dir, 'clone', '-q', '--depth', String(depth), `file://${src}`, 'c');
  return join(dir, 'c');
}

const INCOMPLETE = /^check-goldens: \[meta_golden_history_incomplete\] /m;

function repoWithHistory(unmarked: boolean): string {
  const repo = mkdtempSync(join(tmpdir(), 'detsim-golden-'));
  git(repo, 'init', '-q', '-b', 'main');
  commit(repo, 'README.md', 'x\n', 'first');
  commit(repo, 'fixtures/golden/a.json', '{"reproHash":"0000000000000000"}\n', '[golden] freeze a');
  commit(repo, 'src.ts', '1\n', 'code');
  commit(
    repo,
    'fixtures/golden/a.json',
    '{"reproHash":"1111111111111111"}\n',
    unmarked ? 'refactor something' : 'walker v2 [golden]',
  );
  commit(repo, 'src.ts', '2\n', 'more code');
  return repo;
}

describe('check-goldens (D6)', () => {
  it('[D6] a golden change without [golden] in the subject is refused (exit 1, names the commit)', () => {
    const r = check(repoWithHistory(true));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /\[audit_golden_unmarked\] [0-9a-f]{12} "refactor something" changes fixtures\/golden\/a\.json without \[golden\]/,
    );
  });

  it('[D6] a merge that changes a golden beyond both parents is refused; a merge bringing in a marked change is not', () => {
    const repo = repoWithHistory(false);
    git(repo, 'checkout', '-q', '-b', 'side');
    commit(repo, 'fixtures/golden/a.json', '{"reproHash":"2222222222222222"}\n', '[golden] walker v3');
    git(repo, 'checkout', '-q', 'main');
    commit(repo, 'other.ts', '1\n', 'main moves on');
    git(repo, 'merge', '-q', '--no-ff', '-m', 'merge side', 'side');
    expect(check(repo).status, 'a merge that only brings in the [golden] commit').toBe(0);
    git(repo, 'checkout', '-q', 'side');
    commit(repo, 'side.ts', '1\n', 'side moves on');
    git(repo, 'checkout', '-q', 'main');
    git(repo, 'merge', '-q', '--no-ff', '--no-commit', 'side');
    writeFileSync(join(repo, 'fixtures/golden/a.json'), '{"reproHash":"3333333333333333"}\n');
    git(repo, 'add', 'fixtures/golden/a.json');
    git(repo, 'commit', '-q', '-m', 'merge side again');
    const r = check(repo);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /\[audit_golden_unmarked\] [0-9a-f]{12} "merge side again" changes fixtures\/golden\/a\.json/,
    );
  });

  it('[D6] golden changes that carry [golden] pass; the complete history is the default range', () => {
    const r = check(repoWithHistory(false));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /5 commit\(s\) in the complete history of HEAD, 2 change fixtures\/golden\/, all marked \[golden\]/,
    );
  });

  it('[D6] a [golden] commit that moves a behaviourDigest needs [golden:behaviour] too; adding one does not', () => {
    const repo = mkdtempSync(join(tmpdir(), 'detsim-golden-'));
    git(repo, 'init', '-q', '-b', 'main');
    const golden = (b: string, r: string) => `{"behaviourDigest":"${b.repeat(64)}","reproHash":"${r.repeat(16)}"}\n`;
    commit(repo, 'fixtures/golden/a.json', golden('a', '0'), '[golden] freeze a');
    commit(repo, 'fixtures/golden/a.json', golden('a', '1'), '[golden] re-freeze the ReproHash only');
    expect(check(repo).status, 'a ReproHash re-freeze with the behaviour unchanged').toBe(0);
    commit(repo, 'fixtures/golden/a.json', golden('b', '2'), '[golden] walker v3');
    const r = check(repo);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /\[audit_golden_unmarked\] [0-9a-f]{12} "\[golden\] walker v3" moves a behaviourDigest without \[golden:behaviour\]/,
    );
    git(repo, 'commit', '-q', '--amend', '-m', '[golden] [golden:behaviour] walker v3 changes what walkers do');
    expect(check(repo).status).toBe(0);
  });

  it('an explicit range (argument or DETSIM_GOLDEN_RANGE) checks only that range', () => {
    const repo = repoWithHistory(true);
    expect(check(repo, 'HEAD~1..HEAD').status).toBe(0); // the offending commit is outside
    expect(check(repo, 'HEAD~2..HEAD').status).toBe(1);
    expect(check(repo, undefined, { env: { DETSIM_GOLDEN_RANGE: 'HEAD~1..HEAD' } }).status).toBe(0);
    const r = check(repo, undefined, { env: { DETSIM_GOLDEN_RANGE: 'HEAD~2..HEAD' } });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/\[audit_golden_unmarked\] [0-9a-f]{12} "refactor something"/);
  });

  it('a shallow clone without a range fails loudly instead of checking part of the history', () => {
    for (const depth of [1, 3]) {
      const r = check(shallowClone(repoWithHistory(false), depth));
      expect(r.status, `depth ${depth}: ${r.stdout}`).toBe(1);
      expect(r.stderr).toMatch(INCOMPLETE);
      expect(r.stderr).toMatch(/shallow clone.*git fetch --unshallow.*DETSIM_GOLDEN_RANGE/);
      expect(r.stdout).toBe('');
    }
  });

  it('a shallow clone with DETSIM_GOLDEN_RANGE inside the fetched history checks it; one reaching past it fails loudly', () => {
    const clone = shallowClone(repoWithHistory(true), 3); // HEAD, HEAD~1 (the unmarked change), HEAD~2 (boundary)
    expect(check(clone, undefined, { env: { DETSIM_GOLDEN_RANGE: 'HEAD~1..HEAD' } }).status).toBe(0);
    const caught = check(clone, undefined, { env: { DETSIM_GOLDEN_RANGE: 'HEAD~2..HEAD' } });
    expect(caught.status).toBe(1);
    expect(caught.stderr).toMatch(/\[audit_golden_unmarked\] [0-9a-f]{12} "refactor something"/);
    const past = check(clone, undefined, { env: { DETSIM_GOLDEN_RANGE: 'HEAD' } });
    expect(past.status).toBe(1);
    expect(past.stderr).toMatch(INCOMPLETE);
    expect(past.stderr).toMatch(/reaches 1 commit\(s\) whose parents were not fetched \(first [0-9a-f]{12}\)/);
  });

  it('a range git cannot resolve fails loudly, one line, no stack trace', () => {
    const r = check(repoWithHistory(false), 'origin/nonesuch..HEAD');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(INCOMPLETE);
    expect(r.stderr).toMatch(/range "origin\/nonesuch\.\.HEAD" cannot be resolved/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('detsim verify reports a shallow clone as meta_golden_history_incomplete, an unmarked change as audit_golden_unmarked', () => {
    const src = repoWithHistory(true);
    commit(src, 'scripts/check-goldens.mjs', readFileSync(SCRIPT, 'utf8'), 'the guard');
    expect(goldenMarkerCheck(src)).toMatchObject({ status: 'fail', reason: 'audit_golden_unmarked' });
    const previous = process.env.DETSIM_GOLDEN_RANGE;
    delete process.env.DETSIM_GOLDEN_RANGE;
    try {
      expect(goldenMarkerCheck(shallowClone(src, 2))).toMatchObject({
        status: 'fail',
        reason: 'meta_golden_history_incomplete',
        detail: { message: expect.stringMatching(/shallow clone/) },
      });
    } finally {
      if (previous !== undefined) process.env.DETSIM_GOLDEN_RANGE = previous;
    }
  });

  it('outside a git checkout it passes and says why; with --require-git (CI) it fails', () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-nogit-'));
    const r = check(dir);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/not a git checkout/);
    const ci = check(dir, undefined, { args: ['--require-git'] });
    expect(ci.status).toBe(1);
    expect(ci.stderr).toMatch(INCOMPLETE);
  });
});
