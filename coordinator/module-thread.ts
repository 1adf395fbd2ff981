// Start a worker thread that runs the calling module itself (the seal threads of the store and of the
// trace): from compiled JavaScript it loads the module's file; from TypeScript source (tests, tsx) it
// registers tsx first, because Node 20 does not carry --import loaders into worker threads.
// Not the request/reply bookkeeping (each thread's module keeps its own) and not the worker transport.
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

/** A thread running `moduleUrl` (pass `import.meta.url`) with `mark` as its workerData; unref'd. */
export function startModuleThread(moduleUrl: string, mark: object): Worker {
  const w = moduleUrl.endsWith('.ts')
    ? new Worker(
        `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((t) => { t.register(); return import(${JSON.stringify(moduleUrl)}); });`,
        { eval: true, workerData: mark },
      )
    : new Worker(fileURLToPath(moduleUrl), { workerData: mark });
  w.unref();
  return w;
}
