/**
 * A bank statement is imported only for a bank account the configuration names (PAYRECON_BANK_ACCOUNTS),
 * in that account's currency: a statement of any other account is refused with one line naming it.
 */
import { accepted, type ImportResult, quote, refused } from './refusal.ts';
import type { BankStatement } from './statement.ts';

export interface KnownBankAccount {
  /** The account as statements name it: an IBAN or another id. */
  id: string;
  currency: string;
  /** The merchant account the bank account belongs to. */
  account: string;
  name: string;
}

export function checkBankAccounts(
  file: string,
  statements: readonly BankStatement[],
  known: readonly KnownBankAccount[],
): ImportResult<BankStatement[]> {
  for (const [i, statement] of statements.entries()) {
    const where =
      statement.statementId === null
        ? `statement ${i + 1}`
        : `statement ${i + 1} (Id ${statement.statementId})`;
    const bank = known.find((b) => b.id === statement.account);
    if (bank === undefined) {
      return refused(
        file,
        where,
        `the bank account ${quote(statement.account)} is not one of PAYRECON_BANK_ACCOUNTS`,
      );
    }
    if (bank.currency !== statement.currency) {
      return refused(
        file,
        where,
        `is in ${statement.currency}, but the bank account ${quote(bank.id)} (${bank.name}) is in ${bank.currency}`,
      );
    }
  }
  return accepted([...statements]);
}
