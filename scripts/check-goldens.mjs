#!/usr/bin/env node
// CI guard for golden values (diff0-replay.md D6): refuses (exit 1) when a commit in the range
// changes a file under fixtures/golden/ without "[golden]" in its subject. Range: argv[2] or
// $DETSIM_GOLDEN_RANGE (e.g. origin/main..HEAD); default the whole history reachable from HEAD.
// Works in a fresh clone and in a shallow one (a shallow boundary commit's changes are unknown:
// it is skipped and said so). Outside a git checkout it says so and passes.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const GOLDEN_DIR = 'fixtures/golden/';
const MARKER = '[golden]';

function git(args) {
  return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
}

function inRepo() {
  try {
    return git(['rev-parse', '--is-inside-work-tree']).trim() === 'true';
  } catch {
    return false;
  }
}

if (!inRepo()) {
  console.log('check-goldens: not a git checkout; nothing to check');
  process.exit(0);
}
let hasHead = true;
try {
  git(['rev-parse', '--verify', '--quiet', 'HEAD']);
} catch {
  hasHead = false;
}
if (!hasHead) {
  console.log('check-goldens: no commits yet; nothing to check');
  process.exit(0);
}

const range = process.argv[2] ?? process.env.DETSIM_GOLDEN_RANGE ?? 'HEAD';
// Commits of a shallow clone's boundary have no parents here: their diff would be the whole tree.
const shallowFile = git(['rev-parse', '--git-path', 'shallow']).trim();
const boundary = new Set(existsSync(shallowFile) ? readFileSync(shallowFile, 'utf8').split('\n').filter(Boolean) : []);

// One record per commit that touches the golden directory: "\x01<sha>\x02<subject>" then file names.
const out = git(['log', '--format=%x01%H%x02%s', '--name-only', range, '--', GOLDEN_DIR]);
let checked = 0;
let skipped = 0;
const offenders = [];
for (const record of out.split('\x01').slice(1)) {
  const [head, ...rest] = record.split('\n');
  const [sha, subject] = head.split('\x02');
  const files = rest.map((l) => l.trim()).filter((l) => l.startsWith(GOLDEN_DIR));
  if (files.length === 0) continue;
  if (boundary.has(sha)) {
    skipped++;
    continue;
  }
  checked++;
  if (!subject.includes(MARKER)) offenders.push({ sha, subject, files });
}
const total = git(['rev-list', '--count', range]).trim();
for (const o of offenders) {
  console.error(`check-goldens: [audit_golden_unmarked] ${o.sha.slice(0, 12)} ${JSON.stringify(o.subject)} changes ${o.files.join(', ')} without ${MARKER} in its subject`);
}
const skipNote = skipped ? `; ${skipped} shallow-boundary commit(s) skipped (history not fetched)` : '';
if (offenders.length > 0) {
  console.error(`check-goldens: ${offenders.length} commit(s) change golden values without ${MARKER}; amend their subjects or revert the change`);
  process.exit(1);
}
console.log(`check-goldens: ${total} commit(s) in ${range}, ${checked} change fixtures/golden/, all marked ${MARKER}${skipNote}`);
