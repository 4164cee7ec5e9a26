/**
 * Cashouts (docs/provider.md creation; spec 4.4-4.6 status, hold/release, cancel) and refunds
 * (docs/provider.md creation; 4.7 status) as the merchant's API sees them.
 */
import type { CashoutStatus } from '../domain/statuses.ts';
import {
  cashoutCancelRequestSchema,
  cashoutCreateRequestSchema,
  cashoutStatusRequestSchema,
  cashoutUpdateRequestSchema,
  formatZodIssues,
  refundCreateRequestSchema,
} from '../provider/schemas.ts';
import type { SandboxAccount } from './accounts.ts';
import type { SandboxEngine } from './engine.ts';
import type { CashoutRecord, RefundRecord } from './entities.ts';
import { type Answer, CASHOUT_ERRORS, providerError, resourceNotFound } from './protocol.ts';
import { cashoutBody, cashoutCode, refundBody, refundView, refundVoucherPdf } from './views.ts';

/** Smallest cashout amount (code 533 below it), in minor units. */
export const MIN_CASHOUT_MINOR = 100n;

function issueLines(error: Parameters<typeof formatZodIssues>[0]): string[] {
  return formatZodIssues(error).map((i) => `${i.field}: ${i.rule}`);
}

/**
 * The bank a cashout's `bank_code` names. Codes keep their leading zeros in the provider's examples
 * while GET /v3/banks lists numbers: `"001"`, `"1"` and `1` all name the bank listed as 1.
 */
export function findBank<B extends { code: number }>(banks: readonly B[], code: string): B | undefined {
  const text = code.trim();
  if (!/^\d{1,10}$/.test(text)) return undefined;
  const n = Number(text);
  return banks.find((b) => b.code === n);
}

export function createCashout(engine: SandboxEngine, account: SandboxAccount, body: unknown): Answer {
  const parsed = cashoutCreateRequestSchema.safeParse(body);
  if (!parsed.success) return CASHOUT_ERRORS.invalidParameters(issueLines(parsed.error));
  const req = parsed.data;
  const country = engine.catalogue.countries[req.country];
  if (!country)
    return CASHOUT_ERRORS.invalidParameters(['country: is not a country of the sandbox catalogue']);
  const currency = req.currency ?? country.currency;
  if (currency !== country.currency && currency !== 'USD') return CASHOUT_ERRORS.invalidCurrency();
  if (req.amount < MIN_CASHOUT_MINOR) return CASHOUT_ERRORS.amountUnderMinimum();
  let bankName: string | null = null;
  if (req.bank_code !== undefined) {
    const bank = findBank(engine.catalogue.banks[req.country] ?? [], req.bank_code);
    if (!bank) return CASHOUT_ERRORS.invalidBankCode();
    bankName = bank.name;
  }
  if (engine.cashoutByExternalId(account.name, req.external_id)) return CASHOUT_ERRORS.externalIdUsed();
  const now = engine.clock.now();
  const record: CashoutRecord = {
    kind: 'cashout',
    id: engine.newCashoutId(),
    account: account.name,
    createdAt: now,
    updatedAt: now,
    notificationUrl: req.notification_url,
    history: [],
    status: req.on_hold ? 'ON_HOLD' : 'PENDING',
    externalId: req.external_id,
    country: req.country,
    currency,
    amount: req.amount,
    documentId: req.document_id,
    documentType: req.document_type ?? null,
    beneficiaryName: req.beneficiary_name,
    beneficiaryLastname: req.beneficiary_lastname ?? null,
    email: req.email ?? null,
    phone: req.phone ?? null,
    bankCode: req.bank_code ?? null,
    bankName,
    bankAccount: req.bank_account ?? null,
    bankBranch: req.bank_branch ?? null,
    accountType: req.account_type ?? null,
    comments: req.comments ?? null,
    type: req.type ?? null,
    rejectionCode: null,
    rejectionReason: null,
    providerExternalReference: null,
    everCompleted: false,
    statusReason: null,
  };
  engine.addCashout(record);
  return { status: 200, body: { cashout_id: String(record.id) } };
}

/** Finds the cashout named by cashout_id and/or external_id; both given must name the same one. */
function findCashout(
  engine: SandboxEngine,
  account: SandboxAccount,
  cashoutId: number | undefined,
  externalId: string | undefined,
): CashoutRecord | undefined {
  const byId = cashoutId === undefined ? undefined : engine.cashouts.get(cashoutId);
  const byExt = externalId === undefined ? undefined : engine.cashoutByExternalId(account.name, externalId);
  const found = byId ?? byExt;
  if (!found || found.account !== account.name) return undefined;
  if (cashoutId !== undefined && externalId !== undefined && byId !== byExt) return undefined;
  return found;
}

export function cashoutStatus(
  engine: SandboxEngine,
  account: SandboxAccount,
  body: unknown,
): Answer | string {
  const parsed = cashoutStatusRequestSchema.safeParse(body);
  if (!parsed.success) return CASHOUT_ERRORS.invalidParameters(issueLines(parsed.error));
  const c = findCashout(engine, account, parsed.data.cashout_id, parsed.data.external_id);
  if (!c) return CASHOUT_ERRORS.notFound();
  return cashoutBody(c);
}

function statusAnswer(c: CashoutRecord): Answer {
  const { code, description } = cashoutCode(c.status);
  const body: Record<string, unknown> = { cashout_status: code, cashout_status_description: description };
  if (c.status === 'REJECTED') {
    body.rejection_code = c.rejectionCode;
    body.rejection_reason = c.rejectionReason;
  }
  return { status: 200, body };
}

export function updateCashout(engine: SandboxEngine, account: SandboxAccount, body: unknown): Answer {
  const parsed = cashoutUpdateRequestSchema.safeParse(body);
  if (!parsed.success) return CASHOUT_ERRORS.invalidParameters(issueLines(parsed.error));
  const c = findCashout(engine, account, parsed.data.cashout_id, undefined);
  if (!c) return CASHOUT_ERRORS.notFound();
  const to = parsed.data.status as CashoutStatus;
  // Only PENDING -> ON_HOLD and ON_HOLD -> PENDING (4.5).
  const allowed =
    (c.status === 'PENDING' && to === 'ON_HOLD') || (c.status === 'ON_HOLD' && to === 'PENDING');
  if (!allowed) return CASHOUT_ERRORS.invalidTransition();
  engine.moveCashout(c, to, { trigger: 'api' });
  return statusAnswer(c);
}

export function cancelCashout(engine: SandboxEngine, account: SandboxAccount, body: unknown): Answer {
  const parsed = cashoutCancelRequestSchema.safeParse(body);
  if (!parsed.success) return CASHOUT_ERRORS.invalidParameters(issueLines(parsed.error));
  const c = findCashout(engine, account, parsed.data.cashout_id, parsed.data.external_id);
  if (!c) return CASHOUT_ERRORS.notFound();
  // PENDING, and ON_HOLD (the specific row of 3.2 wins, docs/provider.md); DELIVERED and later: 510.
  if (c.status !== 'PENDING' && c.status !== 'ON_HOLD') return CASHOUT_ERRORS.invalidTransition();
  engine.moveCashout(c, 'CANCELLED', { trigger: 'api' });
  return statusAnswer(c);
}

// ---------------------------------------------------------------- refunds

export function createRefund(engine: SandboxEngine, account: SandboxAccount, body: unknown): Answer {
  const parsed = refundCreateRequestSchema.safeParse(body);
  if (!parsed.success) {
    return providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', issueLines(parsed.error));
  }
  const req = parsed.data;
  const d = engine.deposits.get(req.deposit_id);
  if (!d || d.account !== account.name) return resourceNotFound('Deposit not found');
  if (req.invoice_id !== undefined && req.invoice_id !== d.invoiceId) {
    return providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', [
      'invoice_id: must be the invoice_id of the deposit',
    ]);
  }
  if (d.status !== 'COMPLETED' || d.crypto) {
    return providerError(400, 803, 'DEPOSIT_NOT_REFUNDABLE', `Deposit not refundable in status ${d.status}`);
  }
  const remaining = d.amount - engine.refundedTotal(d.id);
  const amount = req.amount ?? remaining;
  if (amount <= 0n || amount > remaining) {
    return providerError(400, 802, 'INVALID_AMOUNT_TO_REFUND', 'Amount to refund not valid');
  }
  const isCard = d.card !== null;
  if (!isCard && !req.bank_account) {
    return providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', [
      'bank_account: is required for a deposit that was not paid by card',
    ]);
  }
  const now = engine.clock.now();
  const record: RefundRecord = {
    kind: 'refund',
    id: engine.newRefundId(),
    account: account.name,
    createdAt: now,
    updatedAt: now,
    notificationUrl: req.notification_url ?? d.notificationUrl,
    history: [],
    status: 'PENDING',
    depositId: d.id,
    invoiceId: d.invoiceId,
    currency: d.currency,
    amount,
    isCard,
    bankAccount: req.bank_account ? { ...req.bank_account } : null,
    comments: req.comments ?? null,
    everCompleted: false,
    rejectionCode: null,
    rejectionReason: null,
  };
  engine.addRefund(record);
  d.refundedAmount = engine.refundedTotal(d.id);
  d.cachedBody = undefined;
  engine.touch(d);
  const response: Record<string, unknown> = { refund_id: record.id };
  if (isCard) {
    response.refund_info = {
      type: 'CREDIT_CARD',
      result: 'PENDING',
      payment_method: d.paymentMethod,
      payment_method_name: d.paymentMethod ? engine.catalogue.method(d.paymentMethod)?.name : null,
      amount,
      currency: d.currency,
      created_at: new Date(now).toISOString().slice(0, 19).replace('T', ' '),
    };
  }
  return { status: 200, body: response };
}

export function refundStatus(
  engine: SandboxEngine,
  account: SandboxAccount,
  idText: string,
  voucher: boolean,
): Answer | string {
  const id = /^\d{1,15}$/.test(idText) ? Number(idText) : Number.NaN;
  const r = Number.isSafeInteger(id) ? engine.refunds.get(id) : undefined;
  if (!r || r.account !== account.name) return resourceNotFound();
  if (!voucher) return refundBody(r);
  return { status: 200, body: { ...refundView(r), voucher: refundVoucherPdf(r) } };
}
