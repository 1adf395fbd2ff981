// After tsc: mark the CLI entry executable (tsc drops the x bit) and link it into
// node_modules/.bin so that `npx detsim` works inside a fresh clone (npm links only
// dependencies' bins, never the root package's own).
import { chmodSync, existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../dist/coordinator/cli/main.js', import.meta.url));
const binDir = fileURLToPath(new URL('../node_modules/.bin/', import.meta.url));
if (existsSync(cli)) {
  chmodSync(cli, 0o755);
  if (existsSync(fileURLToPath(new URL('../node_modules/', import.meta.url)))) {
    mkdirSync(binDir, { recursive: true });
    const link = `${binDir}detsim`;
    rmSync(link, { force: true });
    symlinkSync('../../dist/coordinator/cli/main.js', link);
  }
}
