// Test harness: is a Rust binary (detsim-worker-rs, detsim-formats, detsim-models) built from this
// checkout's current sources? Reads the dep-info file cargo writes beside the binary (`<binary>.d`,
// every source file the build read) and finds a source changed after the build, a source gone, or,
// for a binary built in another checkout (DETSIM_RUST_WORKER), a source whose bytes differ from
// this checkout's. The cross-language tests call refuseStaleBinary so they fail loudly instead of
// testing an old binary. Not a build tool (rust-worker.ts and rust-cli.ts build); not a test.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const CHECKOUT = fileURLToPath(new URL('../../', import.meta.url));

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
export function binaryStaleness(binary: string, checkout: string = CHECKOUT): string | null {
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

/** Throw (failing the calling test loudly) when `binary` is not a build of this checkout's sources. */
export function refuseStaleBinary(binary: string, rebuild: string, checkout: string = CHECKOUT): void {
  const why = binaryStaleness(binary, checkout);
  if (why === null) return;
  const override = process.env.DETSIM_RUST_WORKER
    ? " (DETSIM_RUST_WORKER is set: unset it to let the tests build this checkout's binary)"
    : '';
  throw new Error(`stale Rust binary, not testing it: ${why}. Rebuild it with: ${rebuild}${override}`);
}
