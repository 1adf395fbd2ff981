// Test harness: the cross-language tests refuse to test a Rust binary that is not a build of this
// checkout's current sources (coordinator/launch/rust-binary.ts decides; this throws, loudly). Not a
// build tool (rust-worker.ts and rust-cli.ts build); not a test.
import { fileURLToPath } from 'node:url';
import { binaryStaleness } from '../../coordinator/launch/rust-binary.js';

export { binaryStaleness, depInfoSources } from '../../coordinator/launch/rust-binary.js';

const CHECKOUT = fileURLToPath(new URL('../../', import.meta.url));

/** Throw (failing the calling test loudly) when `binary` is not a build of this checkout's sources. */
export function refuseStaleBinary(binary: string, rebuild: string, checkout: string = CHECKOUT): void {
  const why = binaryStaleness(binary, checkout);
  if (why === null) return;
  const override = process.env.DETSIM_RUST_WORKER
    ? " (DETSIM_RUST_WORKER is set: unset it to let the tests build this checkout's binary)"
    : '';
  throw new Error(`stale Rust binary, not testing it: ${why}. Rebuild it with: ${rebuild}${override}`);
}
