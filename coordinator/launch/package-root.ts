// Where detsim's own files are at run time: the package root (the checkout, or node_modules/detsim),
// whether this code runs from TypeScript source (tsx, vitest) or from dist/. Every path to a worker
// entry point, a script or the Python venv starts here. NOT where a run's files go (run-dir.ts).
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** True when this module runs from TypeScript source (tsx, vitest), false from compiled dist/. */
export const FROM_SOURCE = import.meta.url.endsWith('.ts');

const here = dirname(fileURLToPath(import.meta.url));

/** detsim's package root: coordinator/launch/ is two levels below it, dist/coordinator/launch/ three. */
export const PACKAGE_ROOT = FROM_SOURCE ? resolve(here, '..', '..') : resolve(here, '..', '..', '..');
