// `detsim fields`: print the receipt field classification table (R1). Formatting only; the
// table itself is coordinator/receipt/fields.ts.
import type { Command } from 'commander';
import { canonicalize } from '../../core/formats/canonical-json.js';
import {
  DEFAULT_PRECISION,
  FIELD_TABLE,
  PHYSICAL_NAMES,
  RECEIPT_VERSION,
  formatFieldTable,
} from '../receipt/fields.js';
import { action, writeStdout } from './common.js';

export function registerFields(program: Command): void {
  program
    .command('fields')
    .description('print the receipt field classification table (physical / repro / opaque)')
    .option('--json', 'print one canonical JSON object')
    .action(
      action((opts: { json?: boolean }) => {
        if (opts.json)
          writeStdout(
            canonicalize({
              receiptVersion: RECEIPT_VERSION,
              defaultPrecision: DEFAULT_PRECISION,
              physicalNames: PHYSICAL_NAMES,
              fields: FIELD_TABLE,
            }),
          );
        else writeStdout(formatFieldTable());
      }),
    );
}
