// The worker's last-resort orphan guard: a small thread that polls the parent pid and SIGKILLs its
// own process once the parent is gone. A thread keeps running while model code blocks the main
// event loop (`for(;;){}`), where process.ts's stdin/ppid watch can never fire. NOT the graceful
// exit (process.ts leaves cleanly first when its loop is free) and no help for a SIGSTOPped worker
// (a stopped process runs no thread): the launcher's parent-death signal covers that.
import { Worker } from 'node:worker_threads';

export interface ParentWatchdogOptions {
  /** How often the thread reads the parent pid. */
  pollMs?: number;
  /** After the parent is seen gone, how long the main loop gets to exit cleanly before SIGKILL. */
  graceMs?: number;
}

// Plain JavaScript evaluated in the thread (no TypeScript loader needed there). process.ppid is
// read afresh on every access, so the thread sees the reparenting when the coordinator dies.
const WATCHDOG_SOURCE = `
const { workerData } = require('node:worker_threads');
const { parent, pollMs, graceMs } = workerData;
const timer = setInterval(() => {
  if (process.ppid === parent) return;
  clearInterval(timer);
  setTimeout(() => process.kill(process.pid, 'SIGKILL'), graceMs);
}, pollMs);
`;

/**
 * Start the watchdog thread. It never keeps the process alive (unref), and a parent pid of 1 at
 * start (already orphaned, or run by init) gives it nothing to watch.
 */
export function startParentWatchdog(options: ParentWatchdogOptions = {}): Worker | undefined {
  const parent = process.ppid;
  if (parent <= 1) return undefined;
  const thread = new Worker(WATCHDOG_SOURCE, {
    eval: true,
    // No loaders in the thread (the worker may run under tsx): it runs plain JavaScript.
    execArgv: [],
    workerData: { parent, pollMs: options.pollMs ?? 250, graceMs: options.graceMs ?? 1_500 },
    // The thread needs almost nothing; keep its heap small and its output out of the worker's.
    resourceLimits: { maxOldGenerationSizeMb: 8, maxYoungGenerationSizeMb: 2 },
    stdout: true,
    stderr: true,
  });
  thread.unref();
  // A thread that fails to start leaves the event-loop watch in place; it must never kill the worker.
  thread.on('error', () => undefined);
  return thread;
}
