/**
 * The parts of payrecon, by name, in the order `payrecon up` starts them. Kept free of imports so the
 * CLI can declare one command per part without loading the app; `src/wiring.ts` gives each its start.
 */
export const PART_NAMES = [
  'reconcile',
  'match-consumer',
  'fetch',
  'alerts',
  'relay',
  'poll',
  'ingest',
  'jobs',
] as const;
export type PartName = (typeof PART_NAMES)[number];

export const PART_INFO: Readonly<Record<PartName, { description: string; needsAccounts: boolean }>> = {
  reconcile: { description: 'Consume observations and intents into the ledger', needsAccounts: false },
  'match-consumer': {
    description: 'Consume imported lines and match them with the configured rules',
    needsAccounts: false,
  },
  fetch: {
    description: 'Consume notifications, read the status at the provider, publish observations',
    needsAccounts: true,
  },
  alerts: { description: 'Deliver alerts to the configured sinks', needsAccounts: false },
  relay: { description: 'Publish the outbox (alerts, imported lines) to Kafka', needsAccounts: false },
  poll: { description: 'Poll the provider for entities due and publish observations', needsAccounts: true },
  ingest: { description: 'Serve the webhook and intent routes (and health, metrics)', needsAccounts: true },
  jobs: {
    description:
      'Run the scheduled jobs (workbooks, sweeps, ledger verification), catching up missed runs at start',
    needsAccounts: true,
  },
};
