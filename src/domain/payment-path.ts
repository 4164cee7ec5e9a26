/** The path of a payment's page (under the page's base), used by the page and by workbook hyperlinks. */
export function paymentPath(account: string, kind: string, entityId: string): string {
  return `/payments/${[account, kind, entityId].map(encodeURIComponent).join('/')}`;
}
