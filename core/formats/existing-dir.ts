// The one "is this an existing directory?" check of paths given as input (a rendezvous directory:
// the coordinator's workers.rendezvous.dir, a worker's --rendezvous), and its refusal. Not creating
// or locking directories (coordinator/session/run-dir.ts) and nothing about what goes in them.
import { statSync } from 'node:fs';
import { DetsimError } from './errors.js';

/** Whether `path` names a directory that exists (anything unreadable or not a string: no). */
export function isExistingDirectory(path: unknown): path is string {
  try {
    return typeof path === 'string' && statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Refuse unless `path` is an existing directory: `struct_invalid_field`, one line
 * `<shown> is not an existing directory` (`shown` names the field and the path as its caller words them).
 */
export function requireExistingDirectory(path: unknown, shown: string, field: string): string {
  if (!isExistingDirectory(path))
    throw new DetsimError('struct_invalid_field', `${shown} is not an existing directory`, field);
  return path;
}
