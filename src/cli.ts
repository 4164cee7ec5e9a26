/**
 * The one `payrecon` command. Each sub-command wires its part from the modules below; this is the only
 * file that may import both the app and `src/embedded/`.
 */
import { Command } from 'commander';

export const program = new Command('payrecon')
  .description('Reconciliation pipeline for the Payment Service API v3')
  .version('0.1.0');

await program.parseAsync(process.argv);
