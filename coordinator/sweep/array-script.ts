// The batch script of `detsim sweep submit`: one Slurm job array whose tasks are the sweep's runs
// not yet done (`--array=3,5,7-11`, `%N` when a limit is given); each task runs
// `detsim sweep task <sweep-dir> $SLURM_ARRAY_TASK_ID` with local workers inside its allocation, so
// submitting the same sweep again continues it like `detsim sweep` does. Text only: NOT its
// submission (slurm/submit.ts) and not the task (task.ts).
import { join } from 'node:path';
import { shellWord } from '../slurm/batch-script.js';
import { NODE_POOL_FLAG } from '../launch/node-flag.js';

export interface ArrayScriptInput {
  name: string;
  /** The sweep directory, absolute. */
  sweepDir: string;
  /** The run indexes the array runs, ascending. */
  indexes: readonly number[];
  /** At most this many tasks at once (`%N`), or undefined for Slurm's own limit. */
  parallel: number | undefined;
  /** Processes each run starts (environment + agent workers), for the comment. */
  workers: number;
  workDir: string;
  node: string;
  cli: string;
}

/** Indexes as Slurm's array ranges: [0,1,2,5,7,8] → "0-2,5,7-8". */
export function arrayRanges(indexes: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < indexes.length;) {
    let j = i;
    while (j + 1 < indexes.length && indexes[j + 1] === indexes[j]! + 1) j++;
    parts.push(i === j ? `${indexes[i]}` : `${indexes[i]}-${indexes[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}

/** The job output pattern: `<sweep-dir>/slurm/<array job id>_<task id>.out`. */
export const arrayOutputPattern = (sweepDir: string): string => join(sweepDir, 'slurm', '%A_%a.out');

export function arrayScript(i: ArrayScriptInput): string {
  // Node's background pool sized to the task's cores, as `detsim` and a Slurm run's batch step start it.
  const task = [i.node, NODE_POOL_FLAG, i.cli, 'sweep', 'task', i.sweepDir];
  return [
    '#!/bin/bash',
    `# Written by \`detsim sweep submit\`: sweep ${i.name}, one array task per run not yet done (${i.indexes.length}).`,
    `# Each task runs (or resumes) its run in ${i.sweepDir}/<run>/ with its ${i.workers} worker processes`,
    '# local to the task; a run already done is skipped, so submitting the sweep again continues it.',
    '# scancel stops a task like Ctrl-C: its checkpoints stay, and the next submission resumes from them.',
    `#SBATCH --job-name=${shellWord(`detsim-sweep-${i.name}`)}`,
    `#SBATCH --array=${arrayRanges(i.indexes)}${i.parallel === undefined ? '' : `%${i.parallel}`}`,
    '#SBATCH --nodes=1',
    '#SBATCH --ntasks=1',
    `#SBATCH --output=${shellWord(arrayOutputPattern(i.sweepDir))}`,
    'set -eu',
    `cd ${shellWord(i.workDir)}`,
    `exec ${task.map(shellWord).join(' ')} "$SLURM_ARRAY_TASK_ID"`,
    '',
  ].join('\n');
}
