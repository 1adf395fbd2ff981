// vitest globalSetup: one private temporary root for the whole suite. The tests, and the runs,
// workers and CLIs they start, make their directories under os.tmpdir(): TMPDIR points it at a
// fresh /tmp/detsim-tests-XXXXXX, removed when the suite ends, so `npm test` leaves nothing in /tmp
// (it left ~1 GB a run). DETSIM_KEEP_TEST_TMP=1 keeps it, printing where, to read a failure's
// files. Worker Unix sockets stay in /tmp/ds-<pid>-* (coordinator/launch/socket-dir.ts). Not a test.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'detsim-tests-'));
  const before = process.env.TMPDIR;
  process.env.TMPDIR = root;
  return () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    if (process.env.DETSIM_KEEP_TEST_TMP) console.log(`test temporaries kept in ${root}`);
    else rmSync(root, { recursive: true, force: true });
  };
}
