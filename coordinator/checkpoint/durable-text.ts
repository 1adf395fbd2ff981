// Replace a small text file in a directory durably: temp → fsync → rename → fsync dir, so a reader
// sees the old file or the whole new one (used to cut trace.jsonl back to a checkpoint boundary).
// NOT a general file layer (the store has its own, store/durable-fs.ts).
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export function writeFileDurable(dir: string, name: string, text: string): void {
  const tmp = join(dir, `tmp-${name}`);
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, join(dir, name));
  const d = openSync(dir, 'r');
  try {
    fsyncSync(d);
  } finally {
    closeSync(d);
  }
}
