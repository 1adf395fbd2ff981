// Worker thread entry (`workers.transport: thread`): the same WorkerRuntime as a worker process,
// served over the thread's parentPort instead of a gRPC server. One stream (the port), Hello-first
// like any stream; an attachment before Hello ends the thread, as it ends a gRPC stream.
// Options arrive as workerData, checked as the process checks its flags (a refusal: exit 2); once
// it listens the thread posts THREAD_READY, its ready line. Not the coordinator's
// side of the thread (coordinator/launch/thread-worker.ts).
import { parentPort, workerData } from 'node:worker_threads';
import { DetsimError } from '../core/formats/errors.js';
import type { Role } from '../core/protocol/bodies.js';
import { replyBody } from '../core/protocol/body-codec.js';
import type { Body, ReplyValue } from '../core/protocol/link.js';
import { ATTACHMENT_BEFORE_HELLO } from '../core/protocol/link.js';
import { THREAD_READY, postPortMessage, readPortBatch, readPortMessage } from '../core/protocol/port-link.js';
import { readModelFlags } from './models/registry.js';
import { RequestQueue } from './request-queue.js';
import { type RuntimeOptions, type StreamState, WorkerRuntime } from './runtime.js';

/** What the coordinator passes to a worker thread (all of it checked here). */
export interface ThreadWorkerData {
  role: Role;
  workerId: string;
  sessionId: string;
  models: string[];
  storeDir?: string;
  strict?: boolean;
}

function fail(why: string): never {
  process.stderr.write(`detsim worker thread: ${why}\n`);
  process.exit(1);
}

/** Check the options as a worker process checks its flags; a refusal ends the thread as it ends a process (exit 2). */
function readOptions(data: ThreadWorkerData): RuntimeOptions {
  try {
    const options: RuntimeOptions = {
      role: data.role,
      workerId: data.workerId,
      sessionId: data.sessionId,
      strict: data.strict === true,
      models: readModelFlags(data.models),
    };
    if (data.storeDir !== undefined) options.storeDir = data.storeDir;
    return options;
  } catch (e) {
    if (!(e instanceof DetsimError)) throw e;
    process.stderr.write(`detsim: [${e.reason}] ${e.message}\n`);
    process.exit(2);
  }
}

const port = parentPort ?? fail('not started as a worker thread');
const data = workerData as ThreadWorkerData;
const options = readOptions(data);
const runtime = new WorkerRuntime(options);
// The parent port carries only the coordinator's requests, printed by its canonicalize.
const stream: StreamState = { introduced: false, printedHere: true };
const queue = new RequestQueue(
  runtime,
  () => process.exit(0),
  (why) => process.stderr.write(`detsim worker ${data.workerId}: reply failed: ${why}\n`),
);
const reply = (body: Body | ReplyValue, attachment?: Uint8Array): void =>
  postPortMessage(port, replyBody(body), attachment);
port.on('message', (value: unknown) => {
  const batch = readPortBatch(value);
  if (batch) {
    for (const body of batch) queue.enqueue(body, undefined, stream, reply);
    return;
  }
  const message = readPortMessage(value);
  if (!message) fail(`${data.workerId}: a message that is not {body, attachment?} arrived; thread ended`);
  if (message.attachment && !stream.introduced) fail(`${data.workerId}: ${ATTACHMENT_BEFORE_HELLO}; thread ended`);
  queue.enqueue(message.body, message.attachment, stream, reply);
});
port.postMessage(THREAD_READY);
