// `detsim store ls|verify|gc <dir>`: inspect, re-verify and explicitly clean a STATE-01 store
// directory, named directly or by its run directory (as every other command takes a run).
// Only argument handling and printing live here; the store itself is store/store.ts.
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import { DetsimError } from '../../core/formats/errors.js';
import { STORE_ID_FILE } from '../../core/protocol/store-id.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { storeDirOf } from '../checkpoint/checkpointing.js';
import { storeGone } from '../checkpoint/resume.js';
import { isExistingDirectory } from '../../core/formats/existing-dir.js';
import { RUN_FILES } from '../session/run-dir.js';
import { withRunLock } from '../session/run-lock.js';
import { CheckpointStore, GENERATION_SUFFIX, STORE_MANIFEST_FILE } from '../store/store.js';
import { action, ExitError, formatError, writeStdout } from './common.js';

/**
 * The store a `<dir>` argument names: a run directory (it holds run.json) names its own store/, so
 * `detsim store verify runs/x` never reports "0 generation(s) verified" for a directory that is no
 * store; a run directory without one is refused by name.
 */
function storeArg(dir: string): string {
  // Not a directory at all (a file, a typo): input, exit 2 for every subcommand.
  if (existsSync(dir) && !isExistingDirectory(dir))
    throw new ExitError(2, formatError(new DetsimError('struct_invalid_field', `${dir} is not a directory`, '<dir>')));
  if (!existsSync(join(dir, RUN_FILES.run))) return dir;
  const store = storeDirOf(dir);
  if (existsSync(store)) return store;
  const why =
    storeGone(dir) ?? `${dir}: a run directory without a checkpoint store (run with --checkpoint-every K to make one)`;
  // An input error (exit 2) for verify too, whose other refusals are verification failures (exit 1).
  throw new ExitError(2, formatError(new DetsimError('struct_run_record', why, '<dir>')));
}

async function ls(dir: string, opts: { json?: boolean }): Promise<void> {
  const store = await CheckpointStore.open(dir);
  const { generations, highWater } = store.snapshot();
  const scan = await store.scan();
  if (opts.json) {
    writeStdout(
      canonicalize({
        generations: generations.map((g) => ({ ...g, highWater: g.checkpointId === highWater })),
        highWater,
        temporaries: scan.temporaries,
        unreferenced: scan.unreferenced,
      }),
    );
    return;
  }
  const manifest = (await store.hasManifest()) ? '' : `, no ${STORE_MANIFEST_FILE}`;
  writeStdout(`store ${dir}: ${generations.length} generation(s), high-water ${highWater ?? 'none'}${manifest}`);
  for (const g of generations) {
    const mark = g.checkpointId === highWater ? '*' : ' ';
    writeStdout(
      `${mark} ${g.checkpointId}\tboundary ${g.boundary}\tsession ${g.sessionId}\tepoch ${g.epoch}\t${g.byteLength} bytes\tsha256 ${g.envelopeDigest.slice(0, 16)}…`,
    );
  }
  if (scan.unreferenced.length > 0)
    writeStdout(`unreferenced (never restore candidates): ${scan.unreferenced.join(' ')}`);
  if (scan.temporaries.length > 0) writeStdout(`temporaries: ${scan.temporaries.join(' ')}`);
}

/**
 * A directory with no manifest, no store id and no generation file is not a store (an empty or mistyped path):
 * refused as input, not "0 generation(s) verified". A store that lost its manifest has generation
 * files, and verify names them as orphaned.
 */
function requireStoreContent(dir: string): void {
  if (existsSync(join(dir, STORE_MANIFEST_FILE)) || existsSync(join(dir, STORE_ID_FILE))) return;
  if (readdirSync(dir).some((f) => f.endsWith(GENERATION_SUFFIX))) return;
  throw new ExitError(
    2,
    formatError(
      new DetsimError(
        'struct_invalid_field',
        `${dir} is not a checkpoint store (no ${STORE_MANIFEST_FILE}, no generation file): name a run directory or its store/`,
        '<dir>',
      ),
    ),
  );
}

async function verify(dir: string): Promise<void> {
  if (isExistingDirectory(dir)) requireStoreContent(dir);
  const store = await CheckpointStore.open(dir);
  const report = await store.verify();
  for (const g of report.generations) {
    if (g.ok) writeStdout(`ok\t${g.checkpointId}\t${g.file}`);
    else
      process.stderr.write(
        `detsim: [${g.reason}] generation ${g.checkpointId} (${g.file}) fails check ${g.check}: ${g.message}\n`,
      );
  }
  for (const id of report.rotated)
    writeStdout(`rotated\t${id}\t(rotated out by a writer while verifying: no longer listed)`);
  if (report.orphaned.length > 0) {
    process.stderr.write(
      `detsim: [audit_store_manifest_missing] ${join(dir, STORE_MANIFEST_FILE)} is missing but ${report.orphaned.length} generation file(s) are present (${report.orphaned.join(' ')}): they are unreferenced, never restore candidates; restore the manifest, or remove them with detsim store gc\n`,
    );
  }
  const bad = report.generations.filter((g) => !g.ok).length;
  if (!report.ok)
    throw new ExitError(
      1,
      `store ${dir}: ${bad} of ${report.generations.length} generation(s) failed verification${report.orphaned.length > 0 ? `, ${report.orphaned.length} orphaned without a manifest` : ''}`,
    );
  const rotated = report.rotated.length > 0 ? `, ${report.rotated.length} rotated out while verifying` : '';
  writeStdout(`store ${dir}: ${report.generations.length} generation(s) verified${rotated}`);
}

/**
 * The run directory a store belongs to, if any: the parent of its real path (symlinks resolved)
 * holding run.json. Any store of a run is gc'ed only under that run's lock, whatever path names it.
 */
function runStoreOf(dir: string): { store: string; runDir: string } | null {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return null; // a missing store: CheckpointStore.open names it
  }
  const parent = dirname(real);
  return existsSync(join(parent, RUN_FILES.run)) ? { store: real, runDir: parent } : null;
}

async function gc(dir: string): Promise<void> {
  // Holding the run lock, no run or resume writes the store while gc deletes: the manifest cannot
  // change under it (CheckpointStore.gc also re-reads it before each deletion, for stores of no run).
  // The real path is cleaned, so a symlink changed meanwhile cannot point gc at another store.
  // A run also holds the lock inside its store (run-lock.ts lockAlongsideRun), and so does gc:
  // reached through a bind mount of the store alone, where no run directory is its parent, the
  // lock file is still the same file (same device and inode) and a live run refuses gc.
  const run = runStoreOf(dir);
  const store = run?.store ?? dir;
  const inStore = (): Promise<void> =>
    existsSync(store) ? withRunLock(store, 'detsim store gc', () => gcUnlocked(store, dir)) : gcUnlocked(store, dir);
  await (run !== null ? withRunLock(run.runDir, 'detsim store gc', inStore) : inStore());
}

async function gcUnlocked(dir: string, shownAs: string): Promise<void> {
  const store = await CheckpointStore.open(dir);
  const removed = await store.gc();
  for (const name of removed) writeStdout(`removed\t${name}`);
  writeStdout(
    removed.length === 0
      ? `store ${shownAs}: nothing to remove`
      : `store ${shownAs}: removed ${removed.length} file(s)`,
  );
}

export function registerStore(program: Command): void {
  const store = program.command('store').description('inspect, verify and clean a STATE-01 checkpoint store directory');
  store
    .command('ls')
    .description('list committed generations (high-water marked *), unreferenced files and temporaries')
    .argument('<dir>', 'store directory, or a run directory (its store/)')
    .option('--json', 'print one canonical JSON object')
    .action(action((dir: string, opts: { json?: boolean }) => ls(storeArg(dir), opts)));
  store
    .command('verify')
    .description(
      're-read and fully verify every listed generation; exit 1 on any failure, or on generation files without a manifest',
    )
    .argument('<dir>', 'store directory, or a run directory (its store/)')
    // An unreadable store manifest is a verification failure too.
    .action(action((dir: string) => verify(storeArg(dir)), 1));
  store
    .command('gc')
    .description(
      "remove temporaries and unreferenced generations (never automatic), listing each; a run's store only under its run lock",
    )
    .argument('<dir>', 'store directory, or a run directory (its store/)')
    .action(action((dir: string) => gc(storeArg(dir))));
}
