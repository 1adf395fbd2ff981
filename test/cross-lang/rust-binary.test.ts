// The stale-binary guard of the cross-language tests (rust-binary.ts) on throwaway checkouts with
// fake binaries and cargo dep-info files: a binary older than a source, a source gone, a binary
// built in another checkout whose sources differ, and a binary without dep-info are refused
// loudly; an up-to-date one (or one from an identical checkout) passes. Not the real binaries
// (their guard runs in every cross-language test's beforeAll).
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { binaryStaleness, depInfoSources, refuseStaleBinary } from './rust-binary.js';

const root = mkdtempSync(join(tmpdir(), 'detsim-stale-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const BUILT = new Date('2026-01-02T00:00:00Z');
const BEFORE = new Date('2026-01-01T00:00:00Z');
const AFTER = new Date('2026-01-03T00:00:00Z');
const BINARY = 'crates-bridge/worker/target/release/detsim-worker-rs';
const SOURCES = [
  'crates-bridge/worker/src/main.rs',
  'crates-bridge/crates/detsim-models/src/lib.rs',
  'proto/detsim/v1/worker.proto',
];

function write(path: string, text: string, at: Date): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  utimesSync(path, at, at);
}

/** A checkout with the three sources and a binary built at BUILT whose dep-info lists them (and files to ignore). */
function checkout(name: string, text = 'fn main() {}'): string {
  const dir = join(root, name);
  for (const s of SOURCES) write(join(dir, s), `${s}: ${text}`, BEFORE);
  const bin = join(dir, BINARY);
  const generated = join(dir, 'crates-bridge/worker/target/release/build/out/detsim.v1.rs');
  write(generated, 'generated', AFTER);
  const listed = [
    ...SOURCES.map((s) => join(dir, s)),
    join(dir, 'crates-bridge/worker/../../proto/detsim/v1/worker.proto'),
    generated,
    '/nonexistent/.cargo/registry/src/tonic/lib.rs',
    join(dir, '../shared/jcs-vectors'),
  ];
  write(`${bin}.d`, `${bin}: ${listed.join(' ')}\n`, BUILT);
  write(bin, 'binary', BUILT);
  return dir;
}

describe('stale Rust binary guard', () => {
  it('reads the sources of a cargo dep-info file (escaped spaces kept)', () => {
    expect(depInfoSources('/t/bin: /a/src/main.rs /a/my\\ dir/x.rs  /a/build.rs\n\n/a/src/main.rs:\n')).toEqual([
      '/a/src/main.rs',
      '/a/my dir/x.rs',
      '/a/build.rs',
    ]);
  });

  it('passes a binary built after all of its sources in this checkout', () => {
    const dir = checkout('fresh');
    expect(binaryStaleness(join(dir, BINARY), dir)).toBeNull();
    expect(() => refuseStaleBinary(join(dir, BINARY), 'bash scripts/build-rust-worker.sh', dir)).not.toThrow();
  });

  it('refuses a binary older than one of its sources, naming the source and the rebuild command', () => {
    const dir = checkout('edited');
    utimesSync(join(dir, SOURCES[1]!), AFTER, AFTER);
    expect(binaryStaleness(join(dir, BINARY), dir)).toBe(
      `its source ${join(dir, SOURCES[1]!)} changed after it was built`,
    );
    expect(() => refuseStaleBinary(join(dir, BINARY), 'bash scripts/build-rust-worker.sh', dir)).toThrow(
      /^stale Rust binary, not testing it: its source .*detsim-models\/src\/lib\.rs changed after it was built\. Rebuild it with: bash scripts\/build-rust-worker\.sh/,
    );
  });

  it('refuses a binary whose listed source is gone', () => {
    const dir = checkout('removed');
    rmSync(join(dir, SOURCES[2]!));
    expect(binaryStaleness(join(dir, BINARY), dir)).toBe(`its source ${join(dir, SOURCES[2]!)} is gone`);
  });

  it('a binary built in another checkout passes only while that checkout’s sources equal this one’s', () => {
    const other = checkout('other');
    const same = checkout('same');
    expect(binaryStaleness(join(other, BINARY), same)).toBeNull();
    const changed = checkout('changed', 'fn main() { changed(); }');
    expect(binaryStaleness(join(other, BINARY), changed)).toBe(
      `it was built in ${other}, whose ${SOURCES[0]} differs from this checkout's`,
    );
  });

  it('refuses a missing binary and a binary without dep-info (its sources cannot be compared)', () => {
    const dir = checkout('no-dep-info');
    rmSync(join(dir, `${BINARY}.d`));
    expect(binaryStaleness(join(dir, BINARY), dir)).toMatch(/has no dep-info file beside it/);
    expect(binaryStaleness(join(dir, 'crates-bridge/target/release/detsim-formats'), dir)).toMatch(/is missing$/);
  });
});
