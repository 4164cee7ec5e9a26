/**
 * The chaos soak in its CI size (test/chaos/soak.ts; `npm run chaos` runs 100,000 entities): about 2,000
 * entities through the sandbox with every fault of the issue — provider 5% 5xx, 1% hanging calls, bursts
 * of 429; webhooks 20% duplicated, 10% reordered, 5% dropped; late rejections; the reconciler process
 * killed with SIGKILL three times, the broker and PostgreSQL each restarted once. At the end the ledger
 * equals the sandbox's ground truth, verifies (in process and through `payrecon db verify`), holds no
 * idempotency key or observation twice, every dropped webhook's status reached the ledger, and every late
 * rejection raised one exception and one alert, nothing was dead-lettered, and the secrets scan
 * (test/audit/secrets-scan.ts) finds nothing in the run's logs, tables, topics and workbooks. With
 * settlements on: the settlement fetch imported the sandbox's files through the faults, every settlement
 * is booked once, the cash leg equals the sandbox's records cell by cell, the open reconciliation
 * exceptions are exactly the planted bank anomalies, every bank proof holds, nothing is matched twice.
 */
import { describe, expect, it } from 'vitest';
import { describeFigures, ISSUE_FAULT_PLAN, runSoak } from './soak.ts';

const ENTITIES = Number(process.env.CHAOS_TEST_ENTITIES ?? 2000);

describe('chaos soak (CI size)', () => {
  it('converges on the ground truth through provider faults, webhook faults, kills and restarts', async () => {
    const f = await runSoak({ entities: ENTITIES, plan: ISSUE_FAULT_PLAN });
    console.info(describeFigures(f).join('\n'));

    // The faults really happened.
    expect(f.entities.total).toBeGreaterThanOrEqual(ENTITIES);
    expect(f.events.filter((e) => e.what === 'reconciler SIGKILL')).toHaveLength(3);
    expect(f.events.filter((e) => e.what === 'broker restart')).toHaveLength(1);
    expect(f.events.filter((e) => e.what === 'PostgreSQL restart')).toHaveLength(1);
    expect(f.provider.errors5xx).toBeGreaterThan(0);
    expect(f.provider.hangs).toBeGreaterThan(0);
    expect(f.provider.rateLimited429).toBeGreaterThan(0);
    expect(f.webhooks.dropped).toBeGreaterThan(0);
    expect(f.webhooks.duplicated).toBeGreaterThan(0);
    expect(f.webhooks.reordered).toBeGreaterThan(0);
    expect(f.lateRejections.atProvider).toBeGreaterThan(0);
    expect(f.lateCompletions.atProvider).toBeGreaterThan(0);
    // The provider's other documented moves are in the traffic.
    expect(f.lateCompletions.fromExpired).toBeGreaterThan(0);
    expect(f.lateCompletions.fromCancelled).toBeGreaterThan(0);
    expect(f.moves.expiredToCancelled).toBeGreaterThan(0);
    expect(f.moves.lateRejected826).toBeGreaterThan(0);
    expect(f.moves.bankCodeForms['"001"']).toBeGreaterThan(0);
    expect(f.moves.bankCodeForms['"1"']).toBeGreaterThan(0);

    // And the books survived them.
    expect(f.ledger.groundTruthDiffSample).toEqual([]);
    expect(f.ledger.groundTruthDiff).toBe(0);
    expect(f.ledger.statusDiff).toBe(0);
    expect(f.ledger.verifyFailures).toEqual([]);
    expect(f.ledger.verifyCli.exitCode).toBe(0);
    expect(f.ledger.duplicateIdempotencyKeys).toBe(0);
    expect(f.ledger.duplicateObservations).toBe(0);
    expect(f.ledger.postings).toBeGreaterThan(0);
    expect(f.droppedRecovery.unrecovered).toBe(0);
    expect(f.droppedRecovery.recoveredByPolling).toBeGreaterThan(0);
    expect(f.lateRejections.mismatched).toEqual([]);
    expect(f.lateRejections.alertsDelivered).toBe(f.lateRejections.atProvider);
    expect(f.lateRejections.duplicateAlerts).toBe(0);
    // Every late payment booked and raised as LATE_COMPLETION; a late-rejected cashout says 826; every
    // bank code stored as the merchant sent it.
    expect(f.lateCompletions.missing).toEqual([]);
    expect(f.lateCompletions.bySource.never).toBeUndefined();
    expect(f.moves.rejectionCodeMismatched).toEqual([]);
    expect(f.moves.bankCodeNotKept).toBe(0);
    // No fact that cannot change changed (the sandbox never does that): nothing frozen by mistake.
    expect(f.exceptionsByType.FACTS_CHANGED ?? 0).toBe(0);
    expect(f.alerts.duplicateIds).toBe(0);
    expect(f.alerts.repeatedExceptions).toEqual([]);
    expect(f.deadLettered).toBe(0);
    // The cash leg: the sandbox settled every day, its bank planted every kind of anomaly, and the
    // settlement fetch ran on the provider's clock through the faults (a run met the PostgreSQL outage and
    // the next tick fetched again).
    const c = f.cash;
    expect(c.settlements.atSandbox).toBeGreaterThan(0);
    expect(c.settlements.converted).toBeGreaterThan(0);
    expect(c.settlements.converted).toBeLessThan(c.settlements.atSandbox);
    for (const kind of ['LATE_CREDIT', 'BATCHED_CREDIT', 'BANK_FEE', 'MISSING_CREDIT', 'RETURNED_CREDIT']) {
      expect(c.anomalies[kind] ?? 0, kind).toBeGreaterThan(0);
    }
    expect(c.fetch.ran).toBeGreaterThan(0);
    expect(c.fetch.failed).toBeGreaterThan(0);
    expect(c.fetch.refused).toEqual([]);
    expect(c.matchedBankLines).toBeGreaterThan(0);
    // Every settlement reported and booked once; the cash leg, cell by cell, is the sandbox's (in the
    // ground-truth diff above too); the open matching exceptions are the planted anomalies, none more,
    // none less; every bank proof holds; nothing booked or matched twice.
    expect(c.settlements.reported).toBe(c.settlements.atSandbox);
    expect(c.settlements.booked).toBe(c.settlements.reported);
    expect(c.cells).toBeGreaterThan(0);
    expect(c.cellDiff).toEqual([]);
    // The provider's balance at each account's latest cut-off is the ledger's, and no drift was raised
    // on the way (the ledger reading a move late is no drift).
    expect(c.balanceChecks.checked).toBeGreaterThan(0);
    expect(c.balanceChecks.differing).toEqual([]);
    expect(c.balanceChecks.driftsRaised).toBe(0);
    expect(c.exceptions.missing).toEqual([]);
    expect(c.exceptions.unexpected).toEqual([]);
    expect(c.exceptions.open.BANK_LINE_UNMATCHED ?? 0).toBeGreaterThan(0);
    expect(c.exceptions.open.SETTLEMENT_NOT_RECEIVED ?? 0).toBeGreaterThan(0);
    expect(c.bankProof.length).toBeGreaterThan(0);
    expect(c.bankProof.filter((p) => !p.explained)).toEqual([]);
    expect(c.doubled).toEqual([]);
    // Nothing secret in the logs, tables, topics or workbooks of the run.
    expect(f.secrets.sample).toEqual([]);
    expect(f.secrets.hits).toBe(0);
    expect(f.secrets.stats.topics).toBeGreaterThan(0);
    expect(f.secrets.stats.workbooks).toBeGreaterThan(0);
  }, 1_200_000);
});
