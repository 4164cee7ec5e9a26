import { describe, expect, it } from 'vitest';
import { reconcileBank } from './bank-reconciliation.ts';

describe('reconcileBank', () => {
  it('explains the difference by the opening before the first statement and the lines not in the ledger', () => {
    // 51,228.54 on the statement, 943.42 in the ledger: 48,164.36 held before, 2,120.76 not booked.
    expect(
      reconcileBank({
        closing: 5_122_854n,
        openingBeforeFirst: 4_816_436n,
        linesNotInLedger: 212_076n,
        ledger: 94_342n,
      }),
    ).toEqual({ difference: 5_028_512n, explained: 5_028_512n, unexplained: 0n });
  });

  it('leaves what a ledger entry off does unexplained, with its sign', () => {
    expect(
      reconcileBank({ closing: 47_050n, openingBeforeFirst: 0n, linesNotInLedger: -2_950n, ledger: 50_100n }),
    ).toEqual({ difference: -3_050n, explained: -2_950n, unexplained: -100n });
  });

  it('cannot say what is unexplained without a closing balance or an opening before the first statement', () => {
    expect(
      reconcileBank({ closing: null, openingBeforeFirst: 0n, linesNotInLedger: 5n, ledger: 7n }),
    ).toEqual({
      difference: null,
      explained: 5n,
      unexplained: null,
    });
    expect(
      reconcileBank({ closing: 10n, openingBeforeFirst: null, linesNotInLedger: 5n, ledger: 7n }),
    ).toEqual({
      difference: 3n,
      explained: null,
      unexplained: null,
    });
  });
});
