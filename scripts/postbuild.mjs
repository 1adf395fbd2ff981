// After tsc: make the CLI entry start Node with the flag every detsim process starts with
// (NODE_POOL_FLAG, coordinator/launch/node-flag.ts, read from tsc's output), mark it executable (tsc
// drops the x bit) and link it into node_modules/.bin so that `npx detsim` works inside a fresh
// clone (npm links only dependencies' bins, never the root package's own).
//
// The flag goes in through a two-line sh/JavaScript preamble, not `#!/usr/bin/env -S node …`:
// BusyBox's env (Alpine) has no -S. sh runs line 2 as `:` then `exec node <flag> <this file>`;
// Node skips line 1 (a hashbang) and reads line 2 as a string statement and a comment.
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const TSC_HASHBANG = '#!/usr/bin/env node\n';
const cli = fileURLToPath(new URL('../dist/coordinator/cli/main.js', import.meta.url));
const flag = new URL('../dist/coordinator/launch/node-flag.js', import.meta.url);
const binDir = fileURLToPath(new URL('../node_modules/.bin/', import.meta.url));

/** Replace tsc's hashbang with the preamble; the source map gets the extra line (a leading ';'). */
async function startWithFlag() {
  const { NODE_POOL_FLAG } = await import(flag.href);
  const preamble = `#!/bin/sh\n':' //; exec node ${NODE_POOL_FLAG} "$0" "$@"\n`;
  const text = readFileSync(cli, 'utf8');
  if (text.startsWith(preamble)) return; // this script ran already on this output
  if (!text.startsWith(TSC_HASHBANG)) throw new Error(`${cli}: expected tsc's "#!/usr/bin/env node" first line`);
  writeFileSync(cli, preamble + text.slice(TSC_HASHBANG.length));
  const mapFile = `${cli}.map`;
  if (existsSync(mapFile)) {
    const map = JSON.parse(readFileSync(mapFile, 'utf8'));
    map.mappings = `;${map.mappings}`;
    writeFileSync(mapFile, JSON.stringify(map));
  }
}

if (existsSync(cli)) {
  await startWithFlag();
  chmodSync(cli, 0o755);
  if (existsSync(fileURLToPath(new URL('../node_modules/', import.meta.url)))) {
    mkdirSync(binDir, { recursive: true });
    const link = `${binDir}detsim`;
    rmSync(link, { force: true });
    symlinkSync('../../dist/coordinator/cli/main.js', link);
  }
}
