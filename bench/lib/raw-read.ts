// The raw read + SHA-256 limit (readFile of the whole file into fresh memory, one SHA-256 of it),
// timed in a child process of its own. Why a child: the limit allocates the whole file afresh on
// every round, and in the process under test that garbage triggers V8's external-memory garbage
// collections (mark-compacts of 15-40 ms), which then land inside the next restore being timed.
// The limit's own cost is the same in either process. NOT a figure or a receipt; suites and
// bench/profile-restore.ts call it. Run as a script, this file is the child.
import { fork, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

interface Ask {
  path: string;
}
interface Answer {
  ms?: number;
  error?: string;
}

/** A child process that times raw readFile + SHA-256 of a file on request. */
export class RawReadLimit {
  private constructor(private readonly child: ChildProcess) {}

  static start(): RawReadLimit {
    // The child inherits the parent's execArgv (the tsx loader when the bench runs from source).
    return new RawReadLimit(
      fork(fileURLToPath(import.meta.url), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
    );
  }

  /** Milliseconds the child took to read the whole file and hash it once. */
  time(path: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`raw read limit process exited (${code})`));
      this.child.once('exit', onExit);
      this.child.once('message', (m: Answer) => {
        this.child.off('exit', onExit);
        if (m.ms === undefined) reject(new Error(`raw read limit failed: ${m.error}`));
        else resolve(m.ms);
      });
      this.child.send({ path } satisfies Ask);
    });
  }

  stop(): void {
    this.child.disconnect();
  }
}

async function answer(ask: Ask): Promise<Answer> {
  try {
    const t = performance.now();
    createHash('sha256')
      .update(await readFile(ask.path))
      .digest();
    return { ms: performance.now() - t };
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
}

if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  process.on('message', (ask: Ask) => void answer(ask).then((a) => process.send!(a)));
}
