// Workers die with their coordinator, whatever state they are in: on Linux every worker command is
// started through util-linux `setpriv --pdeathsig KILL`, which sets PR_SET_PDEATHSIG and then execs
// the worker (same pid). The kernel then SIGKILLs the worker the moment the coordinator dies, even a
// worker spinning in model code or stopped (SIGSTOP) — neither can act for itself. NOT the workers'
// own parent watch (workers/process.ts, the Rust main's threads), which stays as the fallback where
// setpriv is missing and for the instant between fork and prctl.
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

export interface Command {
  command: string;
  args: string[];
}

let setprivPath: string | null | undefined;

/** The first executable `setpriv` on $PATH (or the usual system places). */
function findSetpriv(): string | null {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/bin'].filter((d) => d !== '');
  for (const dir of dirs) {
    const path = join(dir, 'setpriv');
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * setpriv with a working --pdeathsig (util-linux 2.33+), or null. Probed once by running it: an
 * older setpriv would refuse the flag and every worker would then fail to start.
 */
export function pdeathsigWrapper(): string | null {
  if (setprivPath !== undefined) return setprivPath;
  setprivPath = null;
  if (process.platform !== 'linux') return setprivPath;
  const candidate = findSetpriv();
  if (
    candidate &&
    spawnSync(candidate, ['--pdeathsig', 'KILL', '--', process.execPath, '-e', ''], {
      stdio: 'ignore',
      timeout: 10_000,
    }).status === 0
  ) {
    setprivPath = candidate;
  }
  return setprivPath;
}

/**
 * The command that starts `cmd` so that it is SIGKILLed when this process dies. The signal is tied
 * to the spawning thread: call it (and spawn) from the thread that lives as long as the run — the
 * coordinator's main thread. Without setpriv the command is returned unchanged.
 */
export function dieWithCoordinator(cmd: Command): Command {
  const setpriv = pdeathsigWrapper();
  if (!setpriv) return cmd;
  return { command: setpriv, args: ['--pdeathsig', 'KILL', '--', cmd.command, ...cmd.args] };
}
