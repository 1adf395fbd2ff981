// `detsim certs <dir>`: make a per-run TLS set for hand-started or remote workers (coordinator/launch/certs.ts).
// Only flag handling and the listing live here. Prints file names, never a key or the token.
import type { Command } from 'commander';
import { makeCertSet } from '../launch/certs.js';
import { DetsimError } from '../../core/formats/errors.js';
import { action, writeStdout } from './common.js';

export function registerCerts(program: Command): void {
  program
    .command('certs')
    .description(
      'make a per-run CA, the coordinator client pair, the worker server pair and a bearer token in <dir> (0700; keys and token 0600)',
    )
    .argument('<dir>', 'target directory (created if absent; existing files are never overwritten)')
    .option(
      '--host <name>',
      'a worker host name or IP address for the worker certificate (repeatable; localhost, 127.0.0.1, ::1 always)',
      (host: string, all: string[]) => [...all, host],
      [] as string[],
    )
    .option('--days <n>', 'validity in days (default 30)')
    .action(
      action((dir: string, opts: { host: string[]; days?: string }) => {
        const written = makeCertSet(dir, { hosts: opts.host, ...(opts.days ? { days: readDays(opts.days) } : {}) });
        for (const name of written) writeStdout(name);
      }),
    );
}

function readDays(text: string): number {
  const days = /^[1-9][0-9]{0,4}$/.test(text) ? Number(text) : NaN;
  if (!(days <= 3650))
    throw new DetsimError(
      'struct_invalid_field',
      `--days ${JSON.stringify(text)} is not a whole number from 1 to 3650`,
      '--days',
    );
  return days;
}
