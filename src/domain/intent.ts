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
