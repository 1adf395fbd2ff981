// After tsc: make the CLI entry start Node with the flag every detsim process starts with
// (--v8-pool-size=0, NODE_POOL_FLAG in coordinator/launch/launcher.ts), mark it executable (tsc
// drops the x bit) and link it into node_modules/.bin so that `npx detsim` works inside a fresh
// clone (npm links only dependencies' bins, never the root package's own).
//
// The flag goes in through a two-line sh/JavaScript preamble, not `#!/usr/bin/env -S node …`:
// BusyBox's env (Alpine) has no -S. sh runs line 2 as `:` then `exec node <flag> <this file>`;
// Node skips line 1 (a hashbang) and reads line 2 as a string statement and a comment.
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const FLAG = '--v8-pool-size=0';
const TSC_HASHBANG = '#!/usr/bin/env node\n';
const PREAMBLE = `#!/bin/sh\n':' //; exec node ${FLAG} "$0" "$@"\n`;

const cli = fileURLToPath(new URL('../dist/coordinator/cli/main.js', import.meta.url));
const binDir = fileURLToPath(new URL('../node_modules/.bin/', import.meta.url));

/** Replace tsc's hashbang with the preamble; the source map gets the extra line (a leading ';'). */
function startWithFlag() {
  const text = readFileSync(cli, 'utf8');
  if (text.startsWith(PREAMBLE)) return; // this script ran already on this output
  if (!text.startsWith(TSC_HASHBANG)) throw new Error(`${cli}: expected tsc's "#!/usr/bin/env node" first line`);
  writeFileSync(cli, PREAMBLE + text.slice(TSC_HASHBANG.length));
  const mapFile = `${cli}.map`;
  if (existsSync(mapFile)) {
    const map = JSON.parse(readFileSync(mapFile, 'utf8'));
    map.mappings = `;${map.mappings}`;
    writeFileSync(mapFile, JSON.stringify(map));
  }
}

if (existsSync(cli)) {
  startWithFlag();
  chmodSync(cli, 0o755);
  if (existsSync(fileURLToPath(new URL('../node_modules/', import.meta.url)))) {
    mkdirSync(binDir, { recursive: true });
    const link = `${binDir}detsim`;
    rmSync(link, { force: true });
    symlinkSync('../../dist/coordinator/cli/main.js', link);
  }
}
