#!/usr/bin/env node
// Worker process entry: `node workers/main.js --listen unix:/path|host:port --role agent|environment
// --worker-id <Id> [--session <Id>] [--model <path>]… [--strict] [--max-message-bytes N] [--no-parent-watch]
// [--store-dir <abs path> [--store-id <token>]] [--tls-dir DIR | --tls-ca F --tls-cert F --tls-key F --token-file F]
// [--rendezvous DIR [--advertise HOST:PORT]] [--wire grpc|socket]`.
// Argument parsing only; everything else is workers/process.ts.
import { parseArgs } from 'node:util';
import { DetsimError } from '../core/formats/errors.js';
import { readWorkerOptions, runWorkerProcess } from './process.js';

try {
  const { values } = parseArgs({
    options: {
      listen: { type: 'string' },
      role: { type: 'string' },
      'worker-id': { type: 'string' },
      session: { type: 'string' },
      model: { type: 'string', multiple: true },
      strict: { type: 'boolean' },
      'max-message-bytes': { type: 'string' },
      'no-parent-watch': { type: 'boolean' },
      'store-dir': { type: 'string' },
      'store-id': { type: 'string' },
      rendezvous: { type: 'string' },
      advertise: { type: 'string' },
      'tls-dir': { type: 'string' },
      'tls-ca': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'token-file': { type: 'string' },
      wire: { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const options = readWorkerOptions({
    listen: values.listen,
    role: values.role,
    workerId: values['worker-id'],
    session: values.session,
    models: values.model,
    strict: values.strict === true,
    maxMessageBytes: values['max-message-bytes'],
    parentWatch: values['no-parent-watch'] !== true,
    storeDir: values['store-dir'],
    storeId: values['store-id'],
    rendezvous: values.rendezvous,
    advertise: values.advertise,
    tlsDir: values['tls-dir'],
    tlsCa: values['tls-ca'],
    tlsCert: values['tls-cert'],
    tlsKey: values['tls-key'],
    tokenFile: values['token-file'],
    wire: values.wire,
  });
  await runWorkerProcess(options);
} catch (e) {
  if (e instanceof DetsimError) {
    process.stderr.write(`detsim: [${e.reason}] ${e.message}\n`);
    process.exit(2);
  }
  const err = e as NodeJS.ErrnoException;
  if (err && typeof err.code === 'string' && err.code.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`detsim worker: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`detsim worker: cannot start: ${(e as Error).message}\n`);
  process.exit(1);
}
