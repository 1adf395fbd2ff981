// Is a Rust binary (detsim-worker-rs, detsim-formats, detsim-models) a build of these sources? Reads
// the dep-info file cargo writes beside the binary (`<binary>.d`, every source file the build read)
// and finds a source changed after the build, a source gone, or, for a binary built in another
// checkout (DETSIM_RUST_WORKER), a source whose bytes differ from this one's. The launcher refuses a
// run on a stale worker binary at plan time (a binary built before an upgrade speaks an older
// protocol); the cross-language tests refuse to test one. Not a build tool.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { PACKAGE_ROOT } from './package-root.js';

/** The source files a cargo dep-info file lists for its first target (`\ ` escapes a space). */
export function depInfoSources(text: string): string[] {
  const first = text.split('\n').find((l) => l.trim() !== '') ?? '';
  const colon = first.search(/: /);
  if (colon < 0) return [];
  return (
    first
      .slice(colon + 2)
      .replace(/\\ /g, '\u0000')
      .split(/\s+/)
      .filter((p) => p !== '')
      // eslint-disable-next-line no-control-regex -- the NUL placed above
      .map((p) => p.replace(/\u0000/g, ' '))
  );
}

/** The checkout a binary was built in: the directory above its `crates-bridge/` (null if none). */
function checkoutOf(binary: string): string | null {
  const at = binary.lastIndexOf(`${sep}crates-bridge${sep}`);
  return at < 0 ? null : binary.slice(0, at);
}

const inside = (dir: string, path: string): boolean => {
  const rel = relative(dir, path);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
};

/**
 * Why `binary` is not a build of `checkout`'s current sources, or null when it is. Sources outside
 * the binary's checkout (the cargo registry, ../shared) and generated files under target/ are not
 * compared.
 */
export function binaryStaleness(binary: string, checkout: string = PACKAGE_ROOT): string | null {
  const bin = resolve(binary);
  if (!existsSync(bin)) return `${bin} is missing`;
  const depFile = `${bin}.d`;
  if (!existsSync(depFile))
    return `${bin} has no dep-info file beside it (${depFile}), so its sources cannot be compared`;
  const builtAt = statSync(bin).mtimeMs;
  const builtIn = checkoutOf(bin);
  const here = resolve(checkout);
  for (const listed of depInfoSources(readFileSync(depFile, 'utf8'))) {
    const source = resolve(listed);
    if (builtIn === null ? source.includes(`${sep}.cargo${sep}`) : !inside(builtIn, source)) continue;
    if (
      relative(builtIn ?? '/', source)
        .split(sep)
        .includes('target')
    )
      continue;
    if (!existsSync(source)) return `its source ${source} is gone`;
    if (statSync(source).isDirectory()) continue;
    if (statSync(source).mtimeMs > builtAt) return `its source ${source} changed after it was built`;
    if (builtIn !== null && resolve(builtIn) !== here) {
      const mine = join(here, relative(builtIn, source));
      if (!existsSync(mine) || !readFileSync(mine).equals(readFileSync(source)))
        return `it was built in ${builtIn}, whose ${relative(builtIn, source)} differs from this checkout's`;
    }
  }
  return null;
}
