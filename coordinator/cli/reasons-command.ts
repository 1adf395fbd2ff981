// `detsim reasons`: publish every reason code with its layer and summary. Formatting only; the
// registry is core/formats/reasons.ts.
import type { Command } from 'commander';
import { reasonsMarkdown, reasonsText } from '../receipt/reasons-doc.js';
import { action, writeStdout } from './common.js';

export function registerReasons(program: Command): void {
  program
    .command('reasons')
    .description('list every stable reason code with its layer (L1–L8) and meaning')
    .option('--markdown', 'print the docs page (docs/reasons.md)')
    .action(
      action((opts: { markdown?: boolean }) => {
        writeStdout(opts.markdown ? reasonsMarkdown() : reasonsText());
      }),
    );
}
