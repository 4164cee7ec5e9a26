/** A settlement report in the sandbox's CSV layout, shared by the cash-leg tests: its header and two rows. */

/** The merchant's bank account the settlements are paid into. */
export const IBAN = 'NL91ABNA0417164300';

export const SETTLEMENT_HEADER =
  'settlement_id,account,period_start,period_end,currency,gross,fees,settlement_currency,rate,net,value_date,bank_reference';

/** Same currency: 1000.00 less a 1.50 fee. */
export const STL_1 =
  'STL-1,acme,2026-03-01T00:00:00Z,2026-03-02T00:00:00Z,EUR,1000.00,1.50,EUR,1,998.50,2026-03-03,REF-1';

/** Converted: round(1234.56 x 0.9123456789) = 1126.35 EUR, less a 2.50 fee. */
export const STL_2 =
  'STL-2,acme,2026-03-01T00:00:00Z,2026-03-02T00:00:00Z,USD,1234.56,2.50,EUR,0.9123456789,1123.85,2026-03-03,REF-2';
