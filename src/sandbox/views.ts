/**
 * Status views of the spec (2.1 deposit, 2.9 cashout, 2.10 refund) built from records, serialized once
 * per change with lossless amounts and cached on the record (status calls answer from the cache).
 */
import { formatAmount } from '../domain/money.ts';
import {
  CASHOUT_STATUS_CODES,
  CASHOUT_STATUS_DESCRIPTIONS,
  type StoredCashoutStatus,
} from '../domain/statuses.ts';
import { stringifyProviderJson } from '../provider/json.ts';
import type { CatalogueIndex } from './catalogue.ts';
import { formatProviderDateTime } from './clock.ts';
import type { CashoutRecord, DepositRecord, RefundRecord } from './entities.ts';

export function depositView(d: DepositRecord, catalogue: CatalogueIndex): Record<string, unknown> {
  const method = d.paymentMethod ? catalogue.method(d.paymentMethod) : undefined;
  const view: Record<string, unknown> = {
    user_id: d.userId,
    deposit_id: d.id,
    subscription_id: null,
    invoice_id: d.invoiceId,
    country: d.country,
    currency: d.currency,
    local_amount: d.amount,
    usd_amount: d.usdAmount,
    amount: d.amount,
    bonus_amount: d.bonusAmount,
    bonus_relative: d.bonusRelative,
    payment_method: d.paymentMethod,
    payment_type: d.paymentType ?? method?.type ?? null,
    status: d.status,
  };
  if (d.status === 'CANCELLED' && d.statusReason) view.status_reason = d.statusReason;
  // What arrived when it is not the amount asked: the merchant's finance desk reconciles against it.
  if (d.status === 'CANCELLED' && d.statusReason === 'AMOUNT_MISMATCH' && d.paidAmount !== null) {
    view.paid_amount = d.paidAmount;
  }
  view.payer = d.payer;
  view.fee_amount = d.feeAmount;
  view.fee_currency = d.currency;
  view.refunded = d.refundedAmount > 0n;
  view.current_payer_verification = d.payerVerification;
  view.card_detail = d.card
    ? {
        card_holder: d.card.holder,
        brand: d.card.brand,
        masked_card: d.card.maskedCard,
        expiration: d.card.expiration,
        card_type: d.card.cardType,
        transaction_result: d.card.transactionResult,
      }
    : null;
  view.financial_institution = null;
  view.bank_account = d.bankAccount;
  view.completed_payment_method_code = d.completedPaymentMethodCode;
  view.test = d.test;
  view.fee_on_payer = d.feeOnPayer;
  view.created_at = formatProviderDateTime(d.createdAt);
  view.expiration_date = d.expiresAt === null ? null : formatProviderDateTime(d.expiresAt);
  if (d.crypto) {
    view.crypto = { ...d.crypto, crypto_fx: '1', crypto_amount: formatAmount(d.usdAmount) };
  }
  return view;
}

export function depositBody(d: DepositRecord, catalogue: CatalogueIndex): string {
  if (d.cachedBody === undefined) d.cachedBody = stringifyProviderJson(depositView(d, catalogue));
  return d.cachedBody;
}

export function cashoutCode(status: CashoutRecord['status']): { code: number; description: string } {
  const s = status as StoredCashoutStatus;
  return { code: CASHOUT_STATUS_CODES[s], description: CASHOUT_STATUS_DESCRIPTIONS[s] };
}

export function cashoutView(c: CashoutRecord): Record<string, unknown> {
  const { code, description } = cashoutCode(c.status);
  const view: Record<string, unknown> = {
    cashout_id: c.id,
    external_id: c.externalId,
    cashout_status: code,
    cashout_status_description: description,
    provider_external_reference: c.providerExternalReference,
    bank: [
      {
        code: c.bankCode,
        name: c.bankName,
        branch: c.bankBranch,
        account: c.bankAccount,
        beneficiary_name: [c.beneficiaryName, c.beneficiaryLastname].filter(Boolean).join(' '),
      },
    ],
    amount: c.amount,
    currency: c.currency,
  };
  if (c.status === 'REJECTED') {
    view.rejection_code = c.rejectionCode;
    view.rejection_reason = c.rejectionReason;
  }
  return view;
}

export function cashoutBody(c: CashoutRecord): string {
  if (c.cachedBody === undefined) c.cachedBody = stringifyProviderJson(cashoutView(c));
  return c.cachedBody;
}

export function refundView(r: RefundRecord): Record<string, unknown> {
  return {
    refund_id: r.id,
    deposit_id: r.depositId,
    merchant_invoice_id: r.invoiceId,
    status: r.status,
    amount: r.amount,
    currency: r.currency,
  };
}

export function refundBody(r: RefundRecord): string {
  if (r.cachedBody === undefined) r.cachedBody = stringifyProviderJson(refundView(r));
  return r.cachedBody;
}

/** A one-page PDF stating the refund, base64 (the refund voucher). */
export function refundVoucherPdf(r: RefundRecord): string {
  const line = `Refund ${r.id} of deposit ${r.depositId}: ${formatAmount(r.amount)} ${r.currency} - ${r.status}`;
  const safe = line.replace(/[()\\]/g, '');
  const stream = `BT /F1 12 Tf 50 750 Td (${safe}) Tj ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  let pdf = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((o, i) => {
    offsets.push(pdf.length);
    pdf += `${i + 1} 0 obj\n${o}\nendobj\n`;
  });
  const xref = pdf.length;
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const off of offsets) pdf += `${String(off).padStart(10, '0')} 00000 n \n`;
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(pdf, 'latin1').toString('base64');
}
