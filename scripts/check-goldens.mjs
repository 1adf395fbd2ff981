#!/usr/bin/env node
// CI guard for golden values (docs/spec/diff0.md D6): refuses (exit 1) when a commit in the range
// changes a file under fixtures/golden/ without "[golden]" in its subject, or moves a frozen
// behaviourDigest (replaces a value; adding one is no move) without "[golden:behaviour]" too. It is not the golden
// comparison itself (coordinator/diff0/goldens.ts) and never edits history.
//
//   node scripts/check-goldens.mjs [RANGE] [--require-git]
//
// Range: RANGE, else $DETSIM_GOLDEN_RANGE (e.g. origin/main..HEAD), else the whole history
// reachable from HEAD — but only when that history is complete. It never checks less than it
// says: in a shallow clone without an explicit range, with a range that reaches a commit whose
// parents were not fetched (its changes are unknown), or with a range git cannot resolve, it
// fails loudly (exit 1, [meta_golden_history_incomplete]) and says what to do. Outside a git
// checkout it passes and says so, unless --require-git (.ci/run) makes that a failure too.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const GOLDEN_DIR = 'fixtures/golden/';
const MARKER = '[golden]';
/** A commit that changes a frozen behaviourDigest (not only adds one) needs this marker too. */
const BEHAVIOUR_MARKER = '[golden:behaviour]';

/** Whether commit `sha` replaces a behaviourDigest value a golden file held (an addition is not a move). */
function movesBehaviourDigest(sha) {
  const diff = tryGit(['show', '--format=', '--unified=0', '--no-color', sha, '--', GOLDEN_DIR]).out ?? '';
  const values = (sign) =>
    new Set(
      diff
        .split('\n')
        .filter((l) => l.startsWith(sign) && !l.startsWith(`${sign}${sign}${sign}`))
        .flatMap((l) => [...l.matchAll(/"behaviourDigest":"([0-9a-f]{64})"/g)].map((m) => m[1])),
    );
  const added = values('+');
  return [...values('-')].some((v) => !added.has(v));
}
const INCOMPLETE = 'meta_golden_history_incomplete';

function git(args) {
  return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
}

/** git, or null with its first stderr line when it fails (a bad range is an answer, not a crash). */
function tryGit(args) {
  try {
    return { out: git(args), error: null };
  } catch (e) {
    const first =
      String(e.stderr ?? e.message)
        .split('\n')
        .find((l) => l.trim().length > 0) ?? 'git failed';
    return { out: null, error: first.trim() };
  }
}

function refuse(reason, message) {
  console.error(`check-goldens: [${reason}] ${message}`);
  process.exit(1);
}

const args = process.argv.slice(2);
const requireGit = args.includes('--require-git');
const positional = args.filter((a) => !a.startsWith('--'));

if (tryGit(['rev-parse', '--is-inside-work-tree']).out?.trim() !== 'true') {
  if (requireGit) refuse(INCOMPLETE, 'not a git checkout: the [golden] guard has no history to check (--require-git)');
  console.log('check-goldens: not a git checkout; nothing to check');
  process.exit(0);
}
if (tryGit(['rev-parse', '--verify', '--quiet', 'HEAD']).out === null) {
  console.log('check-goldens: no commits yet; nothing to check');
  process.exit(0);
}

const shallow = git(['rev-parse', '--is-shallow-repository']).trim() === 'true';
const explicit = positional[0] ?? (process.env.DETSIM_GOLDEN_RANGE || null);
if (explicit === null && shallow) {
  refuse(
    INCOMPLETE,
    'this is a shallow clone: the whole history cannot be checked. Fetch it (git fetch --unshallow) or set DETSIM_GOLDEN_RANGE to a range inside the fetched history (e.g. origin/main..HEAD)',
  );
}
const range = explicit ?? 'HEAD';

const listed = tryGit(['rev-list', range]);
if (listed.out === null) refuse(INCOMPLETE, `range ${JSON.stringify(range)} cannot be resolved: ${listed.error}`);
const commits = listed.out.split('\n').filter(Boolean);

// A shallow boundary commit has no parents here: its diff would be the whole tree, its real
// changes are unknown. A range that contains one cannot be checked.
const shallowFile = git(['rev-parse', '--git-path', 'shallow']).trim();
const boundary = new Set(existsSync(shallowFile) ? readFileSync(shallowFile, 'utf8').split('\n').filter(Boolean) : []);
const unknown = commits.filter((sha) => boundary.has(sha));
if (unknown.length > 0) {
  refuse(
    INCOMPLETE,
    `range ${JSON.stringify(range)} reaches ${unknown.length} commit(s) whose parents were not fetched (first ${unknown[0].slice(0, 12)}): their changes cannot be checked. Fetch deeper (git fetch --deepen=N or --unshallow) or narrow DETSIM_GOLDEN_RANGE`,
  );
}

// One record per commit that touches the golden directory: "\x01<sha>\x02<subject>" then file names.
// --cc: a merge lists the golden files it leaves different from every parent (an "evil merge"
// edit); a merge that only brings in a marked commit's change lists none.
const out = git(['log', '--format=%x01%H%x02%s', '--name-only', '--cc', range, '--', GOLDEN_DIR]);
let checked = 0;
const offenders = [];
const behaviourMoves = [];
for (const record of out.split('\x01').slice(1)) {
  const [head, ...rest] = record.split('\n');
  const [sha, subject] = head.split('\x02');
  const files = rest.map((l) => l.trim()).filter((l) => l.startsWith(GOLDEN_DIR));
  if (files.length === 0) continue;
  checked++;
  if (!subject.includes(MARKER)) offenders.push({ sha, subject, files });
  else if (!subject.includes(BEHAVIOUR_MARKER) && movesBehaviourDigest(sha)) behaviourMoves.push({ sha, subject });
}
for (const o of behaviourMoves) {
  console.error(
    `check-goldens: [audit_golden_unmarked] ${o.sha.slice(0, 12)} ${JSON.stringify(o.subject)} moves a behaviourDigest without ${BEHAVIOUR_MARKER} in its subject (a ReproHash re-freeze must not carry a behaviour change along)`,
  );
}
if (behaviourMoves.length > 0) process.exit(1);
for (const o of offenders) {
  console.error(
    `check-goldens: [audit_golden_unmarked] ${o.sha.slice(0, 12)} ${JSON.stringify(o.subject)} changes ${o.files.join(', ')} without ${MARKER} in its subject`,
  );
}
if (offenders.length > 0) {
  console.error(
    `check-goldens: ${offenders.length} commit(s) change golden values without ${MARKER}; amend their subjects or revert the change`,
  );
  process.exit(1);
}
const scope = explicit === null ? 'the complete history of HEAD' : range;
console.log(
  `check-goldens: ${commits.length} commit(s) in ${scope}, ${checked} change fixtures/golden/, all marked ${MARKER}`,
);
