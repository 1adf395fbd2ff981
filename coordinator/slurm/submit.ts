// Submitting a batch script with `sbatch --parsable`: the script is written under a temporary name
// beside its final path, submitted, and renamed into place only once sbatch printed a job id; a
// refused job leaves no script behind (sbatch keeps its own copy of an accepted one, so the rename
// after submission is safe). NOT the script's text (batch-script.ts) and not argument handling (cli/).
import { spawnSync } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';

/** A submitted job: its id and where its batch script now is. */
export interface Submitted {
  jobId: string;
  scriptPath: string;
}

/** A `--parsable` reply: `<jobid>` or `<jobid>;<cluster>`. */
const PARSABLE = /^([1-9][0-9]*)(;[A-Za-z0-9_.-]+)?$/;

/** sbatch's first error line (or its exit), for a refusal that says why without dumping its output. */
function sbatchWhy(stderr: string, status: number | null, signal: NodeJS.Signals | null): string {
  const first = stderr
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '');
  const exit = signal ? `signal ${signal}` : `exit ${status}`;
  return first ? `${exit}: ${first}` : exit;
}

/**
 * Write `script` at `scriptPath` and submit it with `sbatch --parsable [sbatchArgs] <script>`; the
 * job id once accepted. A refused job (non-zero exit, or no job id on stdout) removes the script and
 * is thrown as perm_slurm_job_refused naming sbatch's first error line.
 */
export function submitBatchScript(
  sbatch: string,
  script: string,
  scriptPath: string,
  sbatchArgs: readonly string[],
): Submitted {
  // The first directory made for the script (undefined: it existed): removed again if the job is refused.
  const created = mkdirSync(dirname(scriptPath), { recursive: true });
  const staged = join(dirname(scriptPath), `.${basename(scriptPath)}.${process.pid}.tmp`);
  writeFileSync(staged, script, { mode: 0o755 });
  try {
    const r = spawnSync(sbatch, ['--parsable', ...sbatchArgs, staged], { encoding: 'utf8', timeout: 60_000 });
    const reply = (r.stdout ?? '').trim().split('\n').pop() ?? '';
    const id = PARSABLE.exec(reply);
    if (r.error || r.status !== 0 || !id)
      throw new DetsimError(
        'perm_slurm_job_refused',
        `sbatch refused the job (${r.error ? r.error.message : sbatchWhy(r.stderr ?? '', r.status, r.signal)}); no batch script was kept`,
        'sbatch',
      );
    renameSync(staged, scriptPath);
    return { jobId: id[1]!, scriptPath };
  } catch (e) {
    if (created !== undefined) rmSync(created, { recursive: true, force: true });
    throw e;
  } finally {
    rmSync(staged, { force: true });
  }
}
