// The registry of bench suites, in the order `npm run bench` runs them by default.
// Adding a suite: write bench/suites/<name>.ts exporting a BenchSuite, then add one line here.
import type { BenchSuite } from '../lib/suite.js';
import { formats } from './formats.js';
import { checkpointStore } from './checkpoint-store.js';
import { peers } from './peers.js';
import { lockstep } from './lockstep.js';
import { checkpoint } from './checkpoint.js';
import { workers } from './workers.js';
import { receipts } from './receipts.js';
import { soak } from './soak.js';

export const SUITES: readonly BenchSuite[] = [
  formats,
  checkpointStore,
  peers,
  lockstep,
  checkpoint,
  workers,
  receipts,
  soak,
];
