// `detsim store ls|verify|gc <dir>`: inspect, re-verify and explicitly clean a STATE-01 store
// directory. Only argument handling and printing live here; the store itself is store/store.ts.
import { existsSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { STORE_DIR } from '../checkpoint/checkpointing.js';
import { canonicalize } from '../formats/canonical-json.js';
import { RUN_FILES } from '../run-dir.js';
import { withRunLock } from '../run-lock.js';
import { CheckpointStore } from '../store/store.js';
import { action, ExitError, writeStdout } from './common.js';

async function ls(dir: string, opts: { json?: boolean }): Promise<void> {
  const store = await CheckpointStore.open(dir);
  const { generations, highWater } = store.snapshot();
  const scan = await store.scan();
  if (opts.json) {
    writeStdout(canonicalize({ generations: generations.map((g) => ({ ...g, highWater: g.checkpointId === highWater })), highWater, temporaries: scan.temporaries, unreferenced: scan.unreferenced }));
    return;
  }
  writeStdout(`store ${dir}: ${generations.length} generation(s), high-water ${highWater ?? 'none'}`);
  for (const g of generations) {
    const mark = g.checkpointId === highWater ? '*' : ' ';
    writeStdout(`${mark} ${g.checkpointId}\tboundary ${g.boundary}\tsession ${g.sessionId}\tepoch ${g.epoch}\t${g.byteLength} bytes\tsha256 ${g.envelopeDigest.slice(0, 16)}…`);
  }
  if (scan.unreferenced.length > 0) writeStdout(`unreferenced (never restore candidates): ${scan.unreferenced.join(' ')}`);
  if (scan.temporaries.length > 0) writeStdout(`temporaries: ${scan.temporaries.join(' ')}`);
}

async function verify(dir: string): Promise<void> {
  const store = await CheckpointStore.open(dir);
  const report = await store.verify();
  for (const g of report.generations) {
    if (g.ok) writeStdout(`ok\t${g.checkpointId}\t${g.file}`);
    else process.stderr.write(`detsim: [${g.reason}] generation ${g.checkpointId} (${g.file}) fails check ${g.check}: ${g.message}\n`);
  }
  const bad = report.generations.filter((g) => !g.ok).length;
  if (bad > 0) throw new ExitError(1, `store ${dir}: ${bad} of ${report.generations.length} generation(s) failed verification`);
  writeStdout(`store ${dir}: ${report.generations.length} generation(s) verified`);
}

async function gc(dir: string): Promise<void> {
  // A run's own store (`<runDir>/store`): gc only while no run or resume writes that directory.
  const runDir = dirname(resolve(dir));
  const isRunStore = basename(resolve(dir)) === STORE_DIR && existsSync(join(runDir, RUN_FILES.run));
  await (isRunStore ? withRunLock(runDir, 'detsim store gc', () => gcUnlocked(dir)) : gcUnlocked(dir));
}

async function gcUnlocked(dir: string): Promise<void> {
  const store = await CheckpointStore.open(dir);
  const removed = await store.gc();
  for (const name of removed) writeStdout(`removed\t${name}`);
  writeStdout(removed.length === 0 ? `store ${dir}: nothing to remove` : `store ${dir}: removed ${removed.length} file(s)`);
}

export function registerStore(program: Command): void {
  const store = program.command('store').description('inspect, verify and clean a STATE-01 checkpoint store directory');
  store
    .command('ls')
    .description('list committed generations (high-water marked *), unreferenced files and temporaries')
    .argument('<dir>', 'store directory')
    .option('--json', 'print one canonical JSON object')
    .action(action((dir: string, opts: { json?: boolean }) => ls(dir, opts)));
  store
    .command('verify')
    .description('re-read and fully verify every listed generation; exit 1 on any failure')
    .argument('<dir>', 'store directory')
    // An unreadable store manifest is a verification failure too.
    .action(action((dir: string) => verify(dir), 1));
  store
    .command('gc')
    .description('remove temporaries and unreferenced generations (never automatic), listing each')
    .argument('<dir>', 'store directory')
    .action(action((dir: string) => gc(dir)));
}
