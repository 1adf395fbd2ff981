// A raw round trip between the main thread and one worker thread, three ways: `post` (postMessage
// each way, the thread transport's carrier), `block` (the body in a SharedArrayBuffer, an
// Atomics doorbell, the worker blocked in Atomics.wait between messages) and `spin` (the same, but
// both sides spin on the doorbell for up to SPIN_LIMIT polls before they wait). It prints wall time
// and the process's CPU per round trip of a 1.3 KB JSON body: what a shared-memory link could save.
// A developer tool for bench/README.md "Performance of the transports"; NOT a suite and NOT a test.
//
//   node --import tsx bench/thread-roundtrip.ts post      # or: block, spin; alternate them, the machine is shared
import { Worker } from 'node:worker_threads';

const ROUND_TRIPS = 20_000;
const BODY = JSON.stringify({
  method: 'Agent.Commit',
  params: {
    agents: Array.from({ length: 16 }, (_, i) => ({
      agentId: `walker-${i}`,
      observation: { x: i, y: 3, food: [1, 2, 3, 4], reward: 0.5 },
    })),
  },
});

type Mode = 'post' | 'block' | 'spin';

/** Polls of the doorbell before a spinning side waits (`spin`; 0 for `block`). */
const SPIN_LIMIT = 100_000;

/** Atomics.waitAsync (in Node 20's V8, not yet in this project's TypeScript lib). */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(a: Int32Array, i: number, v: number): { async: boolean; value: Promise<unknown> | string };
  }
).waitAsync;

/** Main thread: the requests go out one at a time, each after the previous reply came back. */
async function drive(mode: Mode): Promise<void> {
  const sab = new SharedArrayBuffer(1 << 20);
  const spin = mode === 'spin' ? SPIN_LIMIT : 0;
  const worker = new Worker(ECHO, { eval: true, workerData: { mode, sab, spin } });
  await new Promise((r) => worker.once('message', r));
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  if (mode === 'post') {
    let n = 0;
    await new Promise<void>((done) => {
      worker.on('message', () => (++n === ROUND_TRIPS ? done() : worker.postMessage(BODY)));
      worker.postMessage(BODY);
    });
  } else {
    const ctl = new Int32Array(sab, 0, 4);
    const data = new Uint8Array(sab, 64);
    const enc = new TextEncoder();
    const dec = new TextDecoder();
    for (let i = 0; i < ROUND_TRIPS; i++) {
      ctl[2] = enc.encodeInto(BODY, data).written;
      Atomics.add(ctl, 0, 1);
      Atomics.notify(ctl, 0);
      for (let s = 0; mode === 'spin' && Atomics.load(ctl, 1) === i && s < SPIN_LIMIT; s++);
      const wait = waitAsync(ctl, 1, i);
      if (wait.async) await wait.value;
      dec.decode(data.subarray(0, ctl[3]));
    }
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const perTrip = (us: number) => (us / ROUND_TRIPS).toFixed(1);
  console.log(
    `${mode}: ${perTrip(ms * 1000)} µs wall, ${perTrip(cpu.user + cpu.system)} µs CPU (both threads) per round trip`,
  );
  await worker.terminate();
}

/** The worker thread's code (plain JavaScript, evaluated: no loader in the thread): echo each body back the same way it came. */
const ECHO = `
const { parentPort: port, workerData } = require('node:worker_threads');
const { mode, sab, spin } = workerData;
if (mode === 'post') {
  port.on('message', (m) => port.postMessage(m));
  port.postMessage('ready');
} else {
  const ctl = new Int32Array(sab, 0, 4);
  const data = new Uint8Array(sab, 64);
  const dec = new TextDecoder();
  const enc = new TextEncoder();
  port.postMessage('ready');
  for (let i = 0; ; ) {
    for (let s = 0; Atomics.load(ctl, 0) === i && s < spin; s++);
    Atomics.wait(ctl, 0, i);
    const text = dec.decode(data.subarray(0, ctl[2]));
    ctl[3] = enc.encodeInto(text, data).written;
    Atomics.store(ctl, 1, ++i);
    Atomics.notify(ctl, 1);
  }
}`;

const mode = process.argv[2];
if (mode !== 'post' && mode !== 'block' && mode !== 'spin')
  throw new Error('usage: thread-roundtrip.ts post|block|spin');
await drive(mode);
