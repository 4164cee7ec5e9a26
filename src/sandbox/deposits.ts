/**
 * Deposit creation (4.1, rules 1-8) and card deposit creation (4.3): validation with the contract's
 * schemas plus the catalogue's rules, the ONE_SHOT or HOSTED choice, payment details per method, the
 * QR code of instant payments, and the card-result table.
 */
import QRCode from 'qrcode';
import type { Minor } from '../domain/money.ts';
import { parseAmount } from '../domain/money.ts';
import type { DepositStatus } from '../domain/statuses.ts';
import {
  cardDepositRequestSchema,
  checkReportedInfo,
  depositCreateRequestSchema,
  type FieldIssue,
  formatZodIssues,
} from '../provider/schemas.ts';
import type { SandboxAccount } from './accounts.ts';
import { luhnValid, type PaymentMethodInfo } from './catalogue.ts';
import { formatProviderDateTime } from './clock.ts';
import type { SandboxEngine } from './engine.ts';
import type { CardInfo, DepositRecord } from './entities.ts';
import { type Answer, providerError, validationError } from './protocol.ts';

export interface DepositContext {
  engine: SandboxEngine;
  /** Base URL of the pages (hosted checkout and 3DS), e.g. http://127.0.0.1:8700. */
  pagesUrl: () => string;
}

/** Payer values that rule 4.1.6 lets the hosted checkout correct. */
const SOFT_FIELDS = ['payer.phone', 'payer.address.state', 'payer.address.zip_code'] as const;

const DEFAULT_EXPIRATION_MINUTES = 720;

function lines(issues: readonly FieldIssue[]): string[] {
  return issues.map((i) => `${i.field}: ${i.rule}`);
}

function getPath(obj: unknown, path: string): unknown {
  let cur: unknown = obj;
  for (const part of path.split('.')) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function deletePath(obj: unknown, path: string): void {
  const parts = path.split('.');
  let cur: unknown = obj;
  for (const part of parts.slice(0, -1)) {
    if (typeof cur !== 'object' || cur === null) return;
    cur = (cur as Record<string, unknown>)[part];
  }
  if (typeof cur === 'object' && cur !== null)
    delete (cur as Record<string, unknown>)[parts[parts.length - 1]!];
}

function present(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

/** Rules of the catalogue the contract's schema cannot know: state codes and postal codes per country. */
function catalogueIssues(engine: SandboxEngine, body: Record<string, unknown>): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const countryCode = typeof body.country === 'string' ? body.country : undefined;
  const info = countryCode ? engine.catalogue.countries[countryCode] : undefined;
  if (!info) return issues;
  const state = getPath(body, 'payer.address.state');
  if (typeof state === 'string' && !info.states.includes(state)) {
    issues.push({ field: 'payer.address.state', rule: `must be an ISO 3166-2 state code of ${countryCode}` });
  }
  const zip = getPath(body, 'payer.address.zip_code');
  const zipRe = engine.catalogue.zipRegex(countryCode!);
  if (typeof zip === 'string' && zipRe && !zipRe.test(zip)) {
    issues.push({ field: 'payer.address.zip_code', rule: `must be a postal code of ${countryCode}` });
  }
  return issues;
}

function validateDeposit(engine: SandboxEngine, body: Record<string, unknown>) {
  const parsed = depositCreateRequestSchema.safeParse(body);
  const issues = [...(parsed.success ? [] : formatZodIssues(parsed.error)), ...catalogueIssues(engine, body)];
  return { parsed, issues };
}

/** Payment types a hosted checkout offers: `payment_types`, else `payment_type`; ALL (or none) is null. */
function offeredTypes(type: string | undefined, types: string[] | undefined): string[] | null {
  const list = types && types.length > 0 ? types : type ? [type] : [];
  return list.length === 0 || list.includes('ALL') ? null : list;
}

export function feeOf(amount: Minor, bps: number): Minor {
  return (amount * BigInt(bps) + 5000n) / 10000n;
}

/** Converts an amount with a decimal rate text, rounding half up to cents. */
export function convert(amount: Minor, rate: string): Minor {
  const [i = '0', f = ''] = rate.split('.');
  const scale = 10n ** BigInt(f.length);
  const num = BigInt(i + f);
  return (amount * num + scale / 2n) / scale;
}

function digits(seed: number, length: number): string {
  let out = '';
  let x = seed;
  while (out.length < length) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out += String(x % 10);
  }
  return out;
}

async function paymentDetails(d: DepositRecord, method: PaymentMethodInfo, account: SandboxAccount) {
  const reference = String(d.id).slice(-8).padStart(8, '0');
  const metadata: Record<string, string> = { reference };
  let secondary: Record<string, string> | undefined;
  const payer = (d.payer ?? {}) as Record<string, string>;
  switch (method.metadata) {
    case 'bank_deposit':
      Object.assign(metadata, {
        beneficiary_name: `${account.name} via Payment Service Sandbox`,
        agency: '0001',
        account: `${digits(d.id, 6)}-${digits(d.id + 1, 1)}`,
        ...(d.country === 'BR' ? { CNPJ: '12.345.678/0001-90' } : {}),
        payer_document: payer.document ?? '',
        payer_document_type: payer.document_type ?? '',
      });
      break;
    case 'voucher': {
      const bar = digits(d.id, 44);
      Object.assign(metadata, {
        bar_code: bar,
        digitable_line: `${bar.slice(0, 5)}.${bar.slice(5, 10)} ${bar.slice(10, 15)}.${bar.slice(15, 21)} ${bar.slice(21, 26)}.${bar.slice(26, 32)} ${bar.slice(32, 33)} ${bar.slice(33)}`,
      });
      break;
    }
    case 'instant': {
      const line = `00020126580014br.gov.bcb.pix0136sandbox-${d.id}520400005303986540${d.amount}5802${d.country}5907SANDBOX6009SAO PAULO62070503***6304${digits(d.id, 4)}`;
      const png = await QRCode.toBuffer(line, {
        type: 'png',
        errorCorrectionLevel: 'M',
        margin: 1,
        width: 200,
      });
      secondary = { reference, qr_code: png.toString('base64'), digitable_line: line };
      break;
    }
    case 'hosted_only':
      break;
  }
  return { metadata, secondary };
}

export async function createDeposit(
  ctx: DepositContext,
  account: SandboxAccount,
  body: unknown,
): Promise<Answer> {
  const { engine } = ctx;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return validationError(['body: must be a JSON object']);
  }
  const input = body as Record<string, unknown>;
  let { parsed, issues } = validateDeposit(engine, input);
  // Rule 6: with request_payer_data_on_validation_failure, invalid phone/state/zip do not decline.
  const invalidSoft = new Set<string>();
  if (input.request_payer_data_on_validation_failure === true) {
    const soft = issues.filter((i) => (SOFT_FIELDS as readonly string[]).includes(i.field));
    if (soft.length > 0) {
      const copy = structuredClone(input);
      for (const i of soft) {
        invalidSoft.add(i.field);
        deletePath(copy, i.field);
      }
      ({ parsed, issues } = validateDeposit(engine, copy));
    }
  }
  if (issues.length > 0 || !parsed.success) return validationError(lines(issues));
  const req = parsed.data;
  const country = engine.catalogue.countries[req.country];
  const extra: FieldIssue[] = [];
  if (!country) extra.push({ field: 'country', rule: 'is not a country of the sandbox catalogue' });
  else if (req.currency !== country.currency && req.currency !== 'USD') {
    extra.push({ field: 'currency', rule: `must be ${country.currency} or USD for ${req.country}` });
  }
  let method: PaymentMethodInfo | undefined;
  if (req.payment_method !== undefined) {
    method = engine.catalogue.method(req.payment_method);
    if (!method?.countries.includes(req.country)) {
      extra.push({ field: 'payment_method', rule: `must be a payment method of ${req.country}` });
    }
  }
  const maxExpiration = method?.expirationMinutes ?? DEFAULT_EXPIRATION_MINUTES;
  if (req.expiration !== undefined && req.expiration > maxExpiration) {
    extra.push({
      field: 'expiration',
      rule: `must not exceed the method's default of ${maxExpiration} minutes`,
    });
  }
  const invoiceId = req.invoice_id ?? `inv-${engine.rng.hex(16)}`;
  if (engine.depositByInvoice(account.name, invoiceId)) {
    extra.push({ field: 'invoice_id', rule: 'must be unique (already used)' });
  }
  if (extra.length > 0) return validationError(lines(extra));

  // Rule 4: each method has a minimum set of fields for ONE_SHOT; otherwise HOSTED collects them.
  const missing: string[] = [];
  if (!method) missing.push('payment_method');
  else {
    const sent = structuredClone(input);
    for (const f of invalidSoft) deletePath(sent, f);
    for (const path of method.requires) {
      if (!path.startsWith('reported_info.') && !present(getPath(sent, path))) missing.push(path);
    }
    for (const f of checkReportedInfo(req.country, method.code, req.reported_info)) {
      if (f.missing) missing.push(f.field);
    }
    // Rule 6: an invalid value the method needs goes to the hosted page; others are ignored.
    for (const f of invalidSoft) {
      if (method.requiresValues.includes(f.replace(/^payer\./, '')) && !missing.includes(f)) missing.push(f);
    }
  }
  const hosted = missing.length > 0 || method?.metadata === 'hosted_only';

  const now = engine.clock.now();
  const id = engine.newDepositId();
  const amount = req.amount;
  const feeBps = method?.feeBps ?? 250;
  const fee = feeOf(amount, feeBps);
  const rate = engine.catalogue.currencies[req.currency]?.usdRate ?? '1';
  const payer: Record<string, unknown> = {};
  if (req.payer) {
    for (const k of ['document', 'document_type', 'email', 'first_name', 'last_name', 'phone'] as const) {
      if (req.payer[k] !== undefined) payer[k] = req.payer[k];
    }
    if (req.payer.address && Object.keys(req.payer.address).length > 0)
      payer.address = { ...req.payer.address };
  }
  const record: DepositRecord = {
    kind: 'deposit',
    id,
    account: account.name,
    createdAt: now,
    updatedAt: now,
    notificationUrl: req.notification_url ?? null,
    history: [],
    status: hosted ? 'CREATED' : 'PENDING',
    invoiceId,
    userId: req.payer?.id ?? `u${engine.rng.hex(12)}`,
    country: req.country,
    currency: req.currency,
    amount,
    usdAmount: convert(amount, rate),
    paidAmount: null,
    paymentMethod: method?.code ?? null,
    paymentType: method?.type ?? req.payment_type ?? null,
    checkoutType: hosted ? 'HOSTED' : 'ONE_SHOT',
    statusReason: null,
    payer: Object.keys(payer).length > 0 ? payer : null,
    reportedInfo: req.reported_info ? { ...req.reported_info } : null,
    test: req.test ?? false,
    crypto: req.crypto
      ? { currency: req.crypto.currency, wallet: req.crypto.wallet, network: req.crypto.network }
      : null,
    feeOnPayer: req.fee_on_payer ?? false,
    feeAmount: fee,
    earlyRelease: req.early_release ?? false,
    expiresAt: now + (req.expiration ?? maxExpiration) * 60_000,
    card: null,
    pageToken: engine.rng.hex(32),
    offeredTypes: offeredTypes(req.payment_type, req.payment_types),
    missing,
    bonusAmount: req.bonus_amount ?? null,
    bonusRelative: req.bonus_amount !== undefined ? (req.bonus_relative ?? false) : null,
    description: req.description ?? null,
    merchantExternalReference: req.merchant_external_reference ?? null,
    subMerchantId: req.sub_merchant_id ?? null,
    payerVerification: req.payer?.document ? 'MATCH' : 'NO_CLIENT_DOCUMENT',
    completedPaymentMethodCode: null,
    bankAccount: req.bank_account ? { ...req.bank_account } : null,
    successUrl: req.success_url ?? null,
    backUrl: req.back_url ?? null,
    refundedAmount: 0n,
    everCompleted: false,
    everEarlyReleased: false,
  };
  const redirectUrl = `${ctx.pagesUrl()}/checkout/${record.pageToken}`;
  const response: Record<string, unknown> = {
    checkout_type: record.checkoutType,
    redirect_url: redirectUrl,
    deposit_id: id,
    user_id: record.userId,
    merchant_invoice_id: invoiceId,
  };
  // Stored before the QR code is drawn (an await): a concurrent request with the same invoice_id
  // then finds it taken.
  engine.addDeposit(record, 'api', false);
  if (!hosted && method) {
    const { metadata, secondary } = await paymentDetails(record, method, account);
    response.payment_info = {
      type: method.type,
      payment_method: method.code,
      payment_method_name: method.name,
      amount: record.feeOnPayer ? amount + fee : amount,
      currency: record.currency,
      expiration_date: formatProviderDateTime(record.expiresAt!),
      created_at: formatProviderDateTime(now),
      metadata,
    };
    if (secondary) response.secondary_metadata = secondary;
  }
  if (req.requested_token) response.checkout_token = engine.rng.hex(40);
  return { status: 200, body: response };
}

/** Card results: the test-card table, then number, expiry and token checks; any other valid card succeeds. */
function cardResult(
  engine: SandboxEngine,
  card: { card_number: string; expiration_month: string; expiration_year: string },
): { result: 'SUCCESS' | 'REJECTED' | 'PENDING_AUTHENTICATION'; reasonCode?: string; reason?: string } {
  const test = engine.catalogue.testCard(card.card_number);
  if (test) {
    return test.result === 'PENDING_AUTHENTICATION'
      ? { result: 'PENDING_AUTHENTICATION' }
      : { result: 'REJECTED', reasonCode: test.reasonCode!, reason: test.reason! };
  }
  if (!luhnValid(card.card_number)) {
    return { result: 'REJECTED', reasonCode: 'INVALID_CARD_NUMBER', reason: 'Invalid card number' };
  }
  if (!engine.catalogue.brandOf(card.card_number)) {
    return { result: 'REJECTED', reasonCode: 'CARD_BIN_NOT_FOUND', reason: 'Card BIN not found' };
  }
  const now = new Date(engine.clock.now());
  const year = 2000 + Number(card.expiration_year);
  const month = Number(card.expiration_month);
  if (year < now.getUTCFullYear() || (year === now.getUTCFullYear() && month < now.getUTCMonth() + 1)) {
    return { result: 'REJECTED', reasonCode: 'INVALID_CARD_EXPIRATION', reason: 'Invalid card expiration' };
  }
  return { result: 'SUCCESS' };
}

export function createCardDeposit(ctx: DepositContext, account: SandboxAccount, body: unknown): Answer {
  const { engine } = ctx;
  if (!account.pci) {
    return providerError(
      403,
      100,
      'NOT_PCI_COMPLIANT',
      'Card data endpoint restricted to PCI-compliant merchants',
    );
  }
  // The schema's cross-field check reads the body's fields even when the body is not an object.
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', ['body: must be a JSON object']);
  }
  const parsed = cardDepositRequestSchema.safeParse(body);
  if (!parsed.success) {
    return providerError(
      400,
      300,
      'INVALID_PARAMETERS',
      'Invalid request',
      lines(formatZodIssues(parsed.error)),
    );
  }
  const req = parsed.data;
  const country = engine.catalogue.countries[req.country];
  if (!country) {
    return providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', [
      'country: is not a country of the sandbox catalogue',
    ]);
  }
  const currency = req.currency ?? 'USD';
  const invoiceId = req.invoice_id ?? `inv-${engine.rng.hex(16)}`;
  if (engine.depositByInvoice(account.name, invoiceId)) {
    return providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', [
      'invoice_id: must be unique (already used)',
    ]);
  }
  let outcome: ReturnType<typeof cardResult>;
  let brand = engine.catalogue.cardBrands[0]!;
  let masked: string;
  let holder: string;
  let expiration: string;
  if (req.credit_card) {
    const cc = req.credit_card;
    outcome = cardResult(engine, cc);
    brand = engine.catalogue.brandOf(cc.card_number) ?? brand;
    masked = `${cc.card_number.slice(0, 6)}${'*'.repeat(Math.max(0, cc.card_number.length - 10))}${cc.card_number.slice(-4)}`;
    holder = cc.holder_name;
    expiration = `20${cc.expiration_year}-${cc.expiration_month.padStart(2, '0')}`;
  } else {
    // Tokens from the cards SDK: `tok_3ds...` asks for 3DS, `tok_reject...` is declined, others succeed.
    const token = req.card_token ?? '';
    outcome = token.startsWith('tok_3ds')
      ? { result: 'PENDING_AUTHENTICATION' }
      : token.startsWith('tok_reject')
        ? { result: 'REJECTED', reasonCode: 'CARD_DECLINED', reason: 'Card Rejected' }
        : { result: 'SUCCESS' };
    masked = '411111******1111';
    holder = `${req.payer.first_name} ${req.payer.last_name}`;
    expiration = `${new Date(engine.clock.now()).getUTCFullYear() + 3}-12`;
  }
  const method = engine.catalogue.method(brand.method)!;
  const now = engine.clock.now();
  const status: DepositStatus =
    outcome.result === 'SUCCESS'
      ? 'COMPLETED'
      : outcome.result === 'REJECTED'
        ? 'DECLINED'
        : 'PENDING_AUTHENTICATION';
  const card: CardInfo = {
    brand: brand.brand,
    maskedCard: masked,
    holder,
    expiration,
    cardType: 'CREDIT',
    transactionResult: outcome.result,
    reasonCode: outcome.reasonCode ?? null,
    reason: outcome.reason ?? null,
    installments: req.installments ?? null,
  };
  const payer: Record<string, unknown> = {
    document: req.payer.document,
    email: req.payer.email,
    first_name: req.payer.first_name,
    last_name: req.payer.last_name,
  };
  if (req.payer.document_type) payer.document_type = req.payer.document_type;
  if (req.payer.phone) payer.phone = req.payer.phone;
  if (req.payer.address) payer.address = { ...req.payer.address };
  const record: DepositRecord = {
    kind: 'deposit',
    id: engine.newDepositId(),
    account: account.name,
    createdAt: now,
    updatedAt: now,
    notificationUrl: null,
    history: [],
    status,
    invoiceId,
    userId: req.payer.id ?? `u${engine.rng.hex(12)}`,
    country: req.country,
    currency,
    amount: req.amount,
    usdAmount: convert(req.amount, engine.catalogue.currencies[currency]?.usdRate ?? '1'),
    paidAmount: null,
    paymentMethod: method.code,
    paymentType: 'CREDIT_CARD',
    checkoutType: 'CARD',
    statusReason: null,
    payer,
    reportedInfo: null,
    test: false,
    crypto: null,
    feeOnPayer: req.fee_on_payer ?? false,
    feeAmount: feeOf(req.amount, method.feeBps),
    earlyRelease: false,
    expiresAt: status === 'PENDING_AUTHENTICATION' ? now + method.expirationMinutes * 60_000 : null,
    card,
    pageToken: engine.rng.hex(32),
    offeredTypes: null,
    missing: [],
    bonusAmount: null,
    bonusRelative: null,
    description: req.description ?? null,
    merchantExternalReference: null,
    subMerchantId: req.sub_merchant_id ?? null,
    payerVerification: 'MATCH',
    completedPaymentMethodCode: status === 'COMPLETED' ? method.code : null,
    bankAccount: null,
    successUrl: null,
    backUrl: null,
    refundedAmount: 0n,
    everCompleted: false,
    everEarlyReleased: false,
  };
  const paymentInfo: Record<string, unknown> = {
    type: 'CREDIT_CARD',
    result: outcome.result,
  };
  if (outcome.result === 'REJECTED') {
    paymentInfo.reason = outcome.reason;
    paymentInfo.reason_code = outcome.reasonCode;
  }
  Object.assign(paymentInfo, {
    payment_method: method.code,
    payment_method_name: method.name,
    amount: req.amount,
    currency,
    created_at: formatProviderDateTime(now),
  });
  const response: Record<string, unknown> = {
    deposit_id: record.id,
    user_id: record.userId,
    merchant_invoice_id: invoiceId,
    payment_info: paymentInfo,
  };
  if (status === 'PENDING_AUTHENTICATION')
    response.authentication_url = `${ctx.pagesUrl()}/3ds/${record.pageToken}`;
  // Synchronous results send no notification; a 3DS challenge does (4.3).
  engine.addDeposit(record, 'api', status === 'PENDING_AUTHENTICATION');
  return { status: 200, body: response };
}

/** Parses an amount given to the control API (text or number). */
export function controlAmount(value: unknown): Minor | undefined {
  if (value === undefined || value === null) return undefined;
  return parseAmount(String(value), { field: 'amount' });
}
