// Test helper: every file under a directory with the SHA-256 of its bytes, to assert that a
// refused command changed nothing (no file added, removed or rewritten). Not a test itself.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export function snapshotDir(root: string, dir = root, out: Record<string, string> = {}): Record<string, string> {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) snapshotDir(root, path, out);
    else out[relative(root, path)] = createHash('sha256').update(readFileSync(path)).digest('hex');
  }
  return out;
}
