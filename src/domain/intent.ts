/**
 * Intent rules that need no I/O: the local currency of each country the provider serves (a cashout
 * created without a currency is paid in it).
 */

/** Local currency of the countries the provider serves, for cashouts created without a currency. */
export const LOCAL_CURRENCY: Readonly<Record<string, string>> = {
  AR: 'ARS',
  BO: 'BOB',
  BR: 'BRL',
  CL: 'CLP',
  CO: 'COP',
  CR: 'CRC',
  EC: 'USD',
  GT: 'GTQ',
  MX: 'MXN',
  PA: 'USD',
  PE: 'PEN',
  PY: 'PYG',
  SV: 'USD',
  UY: 'UYU',
};

/** The currency a cashout to `country` is paid in when its request names none. */
export function localCurrency(country: string): string | undefined {
  return LOCAL_CURRENCY[country];
}

/**
 * The reference a refund's intent is written ahead under (recordingClient): the refunded deposit and the
 * amount, the only facts of the request that the provider's refund readings repeat (they carry no
 * merchant reference and no idempotency key). The ledger matches a refund it observes to a pending
 * intent under this reference. Two refunds of one deposit for the same amount share it: either may
 * take either record, whose facts are the same.
 */
export function refundWriteAheadRef(depositId: string, amount: bigint): string {
  return `refund-of:${depositId}:${amount}`;
}
