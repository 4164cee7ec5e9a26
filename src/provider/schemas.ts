/**
 * The Payment Service API v3 contract as zod schemas: every request, response, error and notification
 * body of the spec (sections 2, 4, 7) and of docs/provider.md (cashout and refund creation,
 * notifications). Every field limit and format of sections 2.3-2.8 and 8 is a rule here, and each
 * rule's message is the text that `validationMessages()` prints (`payer.email: must be a valid e-mail
 * address`).
 *
 * Conventions:
 * - Inputs are parsed-provider-JSON values (`parseProviderJson`), where numbers are text. Amounts come
 *   out as `Minor` (bigint cents); ids and codes as numbers; everything else as given.
 * - Request schemas strip unknown keys (what is sent is exactly what the contract names). Response
 *   schemas are loose: unknown extra fields are kept (the client logs them once as drift).
 * - Where the spec marks a field required but the provider answers a missing one with a HOSTED
 *   checkout instead of an error (4.1 rule 2), the field is optional here.
 */
import { z } from 'zod';
import { CASHOUT_STATUS_CODES, DEPOSIT_STATUSES, REFUND_STATUSES } from '../domain/statuses.ts';
import {
  amount,
  bool,
  compactDate,
  country,
  currency,
  DATE_TIME_TEXT,
  decimalText,
  email,
  httpsUrl,
  id,
  int,
  ipAddress,
  needs,
  pattern,
  phone,
  text,
  textOrNumber,
  webUrl,
} from './rules.ts';

// ---------------------------------------------------------------- catalogues

/** Payment types the spec names (2.3, 2.7, 2.8). The full list is not published. */
export const PAYMENT_TYPES = ['ALL', 'BANK_DEPOSIT', 'BANK_TRANSFER', 'CREDIT_CARD'] as const;
export type PaymentType = (typeof PAYMENT_TYPES)[number];

/** Cryptocurrency symbols of 2.6. */
export const CRYPTO_CURRENCIES = ['BUSD', 'DAI', 'RDOC', 'USDT', 'USDC'] as const;
export type CryptoCurrency = (typeof CRYPTO_CURRENCIES)[number];

/** Network symbols of 2.6 (others are arranged with the account manager). */
export const CRYPTO_NETWORKS = [
  'AVAXC',
  'BEP2',
  'BEP20',
  'ERC20',
  'Polygon',
  'Solana',
  'TRC20',
  'Tezos',
  'RSK',
] as const;
export type CryptoNetwork = (typeof CRYPTO_NETWORKS)[number];

/** Hosted-checkout languages (2.3). */
export const LANGUAGES = ['es', 'en', 'pt', 'ja'] as const;
export type Language = (typeof LANGUAGES)[number];

/** Card rejection reason codes (7.3). */
export const CARD_REJECTION_CODES = [
  'EXTERNAL_HIGH_RISK',
  'TRX_NOT_SUPPORTED',
  'INVALID_CARD_NUMBER',
  'INVALID_CARD_HOLDER',
  'INVALID_CARD_EXPIRATION',
  'INVALID_SECURITY_CODE',
  'INVALID_ISSUER',
  'INVALID_PIN',
  'DUPLICATE_PAYMENT',
  'MAX_ATTEMPTS_REACHED',
  'INSUFFICIENT_FUNDS',
  'AUTHORIZATION_CALL_REQUIRED',
  'CARD_BIN_NOT_FOUND',
  'CARD_EXPIRED',
  'CARD_DECLINED',
  'CARD_REPORTED_STOLEN',
  'CARD_REPORTED_LOST',
  'CARD_RESTRICTED_BY_BANK',
  'CARD_REQUESTED_BY_BANK',
  'CARD_BLACKLISTED',
  'CARD_DISABLED',
  'OTHER_REASON',
] as const;
export type CardRejectionCode = (typeof CARD_REJECTION_CODES)[number];

/**
 * Identity document types per country. The provider's list is not published; this is payrecon's
 * (the usual national documents). A `document_type` sent for a country listed here must be one of its
 * types; for other countries any 1-10 letters, digits or `_` are accepted.
 */
export const DOCUMENT_TYPES = {
  AR: ['DNI', 'CUIT', 'CUIL', 'CDI', 'PASS'],
  BR: ['CPF', 'CNPJ', 'PASS'],
  CL: ['RUT', 'PASS'],
  CO: ['CC', 'CE', 'NIT', 'TI', 'PASS'],
  MX: ['CURP', 'RFC', 'IFE', 'PASS'],
  PA: ['CIP', 'PASS'],
  PE: ['DNI', 'CE', 'RUC', 'PASS'],
  UY: ['CI', 'RUT', 'PASS'],
} as const satisfies Record<string, readonly string[]>;

/** Cashout `account_type`: C checking, S savings. */
export const ACCOUNT_TYPES = ['C', 'S'] as const;

export const CHECKOUT_TYPES = ['ONE_SHOT', 'HOSTED'] as const;
export const CARD_RESULTS = ['SUCCESS', 'REJECTED', 'PENDING_AUTHENTICATION'] as const;
export const STATUS_REASONS = ['THIRD_PARTY_PAYER', 'AMOUNT_MISMATCH'] as const;
export const PAYER_VERIFICATIONS = [
  'MATCH',
  'UNMATCH',
  'NO_CLIENT_DOCUMENT',
  'NO_CURRENT_PAYER_DATA',
] as const;
export const CARD_TYPES = ['CREDIT', 'DEBIT'] as const;
/** Statuses a cashout can be set to through PUT /v3/cashout/status (4.5). */
export const CASHOUT_UPDATE_STATUSES = ['ON_HOLD', 'PENDING'] as const;

function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, needs(`one of ${values.join(', ')}`));
}

/** Cross-field checks also run when a field already failed, so one answer lists every problem. */
const ALWAYS = { when: () => true };

// ---------------------------------------------------------------- field rules

const INVOICE_ID = /^[A-Za-z0-9_-]+$/;
const PAYER_ID = /^[A-Za-z0-9]+$/;

/** invoice_id: max 128, characters A-Z a-z 0-9 - _ (2.3, 2.8). */
export const invoiceIdSchema = pattern(INVOICE_ID, 'only A-Z a-z 0-9 - _ allowed', 128).min(
  1,
  'must not be empty',
);

const paymentTypeText = pattern(/^[A-Z][A-Z0-9_]*$/, 'must be an upper-case payment type code', 32);
const methodCode = pattern(/^[A-Za-z0-9_-]+$/, 'must be a payment method code', 32);
const documentType = pattern(/^[A-Za-z0-9_]+$/, 'only letters, digits and _ allowed', 10).min(
  1,
  'must not be empty',
);

/** Card expiration month: 1 to 12 with or without a leading zero (2.8). */
const expirationMonth = pattern(/^(?:0?[1-9]|1[0-2])$/, 'must be a month from 1 to 12', 2);
const expirationYear = pattern(/^\d{2}$/, 'must be the last two digits of the year', 2);

// ---------------------------------------------------------------- payer (2.4) and address

const addressRequestSchema = z.object({
  street: text(255).optional(),
  city: text(128).optional(),
  state: pattern(/^[A-Za-z0-9]{1,3}$/, 'must be an ISO 3166-2 state code', 3).optional(),
  zip_code: pattern(/^[A-Za-z0-9 -]+$/, 'must be a postal code', 16).optional(),
});

const payerBase = {
  id: pattern(PAYER_ID, 'only A-Z a-z 0-9 allowed', 128).min(1, 'must not be empty').optional(),
  document_type: documentType.optional(),
  phone: phone().optional(),
  birth_date: compactDate().optional(),
  address: addressRequestSchema.optional(),
};

/** Payer of the non-card deposit creation: missing fields make the checkout HOSTED, so all optional. */
export const payerRequestSchema = z.object({
  ...payerBase,
  document: text(30, 1).optional(),
  email: email().optional(),
  first_name: text(128, 1).optional(),
  last_name: text(128, 1).optional(),
  registration_date: compactDate().optional(),
});

/** Payer of the card endpoint: no hosted fallback, so the four "Yes" fields of 2.4 are required. */
export const cardPayerRequestSchema = z.object({
  ...payerBase,
  document: text(30, 1),
  email: email(),
  first_name: text(128, 1),
  last_name: text(128, 1),
});

/** Checks a payer's document_type against the country's list (`DOCUMENT_TYPES`). */
function checkDocumentType(
  countryCode: string,
  payer: { document_type?: string | undefined } | undefined,
  ctx: z.RefinementCtx,
) {
  const type = typeof payer === 'object' && payer !== null ? payer.document_type : undefined;
  if (typeof type !== 'string') return;
  const allowed = (DOCUMENT_TYPES as Record<string, readonly string[]>)[countryCode];
  if (allowed && !allowed.includes(type)) {
    ctx.addIssue({
      code: 'custom',
      path: ['payer', 'document_type'],
      message: `must be a document type of ${countryCode}: ${allowed.join(', ')}`,
    });
  }
}

// ---------------------------------------------------------------- reported_info (2.5)

export const reportedInfoSchema = z.object({
  bank_account_number: text(45).optional(),
  bank_branch: text(45).optional(),
  bank_beneficiary: text(255).optional(),
  /** Named by the BR CA row of 2.5; its format is not given. */
  bank_account_type: text(45).optional(),
});
export type ReportedInfo = z.output<typeof reportedInfoSchema>;

type ReportedField = 'bank_account_number' | 'bank_branch' | 'bank_beneficiary' | 'bank_account_type';

interface ReportedRule {
  field: ReportedField;
  format: RegExp;
  rule: string;
}

const BENEFICIARY: ReportedRule = {
  field: 'bank_beneficiary',
  format: /^[^\d\s]{2,30}(?: [^\d\s]{2,30})+$/,
  rule: 'must be two or more words of 2 to 30 characters without digits',
};

/**
 * The 2.5 table: country, method code, and the fields (with formats) that ONE_SHOT needs. Keys are
 * `<country>:<method>`.
 */
export const REPORTED_INFO_RULES: Readonly<Record<string, readonly ReportedRule[]>> = (() => {
  const rules: Record<string, ReportedRule[]> = {};
  const add = (countryCode: string, methods: string[], list: ReportedRule[]) => {
    for (const m of methods) rules[`${countryCode}:${m}`] = list;
  };
  add('BR', ['SJ', 'B', 'SF'], [BENEFICIARY]);
  add(
    'BR',
    ['BB'],
    [
      {
        field: 'bank_account_number',
        format: /^\d{1,11}-[A-Za-z0-9]$/,
        rule: 'must be 1 to 11 digits, a hyphen and one letter or digit',
      },
      {
        field: 'bank_branch',
        format: /^\d{1,4}(?:-[A-Za-z0-9])?$/,
        rule: 'must be 1 to 4 digits, optionally a hyphen and one letter or digit',
      },
    ],
  );
  add(
    'BR',
    ['BZ'],
    [
      { field: 'bank_branch', format: /^\d{1,4}$/, rule: 'must be 1 to 4 digits' },
      {
        field: 'bank_account_number',
        format: /^\d{1,9}-\d$/,
        rule: 'must be 1 to 9 digits, a hyphen and one digit',
      },
    ],
  );
  add(
    'BR',
    ['CA'],
    [
      { field: 'bank_account_type', format: /^.+$/, rule: 'must not be empty' },
      { field: 'bank_branch', format: /^\d{1,4}$/, rule: 'must be 1 to 4 digits' },
      {
        field: 'bank_account_number',
        format: /^\d{1,14}-\d$/,
        rule: 'must be 1 to 14 digits, a hyphen and one digit',
      },
    ],
  );
  add('CL', ['IA', 'SC', 'TY'], [BENEFICIARY]);
  add('PA', ['DI'], [BENEFICIARY]);
  add('PE', ['BC', 'IB'], [BENEFICIARY]);
  return rules;
})();

export interface ReportedInfoFailure {
  /** Dotted path, e.g. `reported_info.bank_branch`. */
  field: string;
  rule: string;
  /** True when the field is absent (the provider then answers HOSTED rather than rejecting). */
  missing?: boolean;
}

/**
 * Checks `reported_info` against the 2.5 table for a country and method. Returns one failure per
 * field that is missing (`missing: true`) or breaks its format; an empty list when the method needs
 * nothing or everything is right. The deposit schema rejects only malformed values (a missing field
 * makes the provider answer HOSTED); the sandbox uses the missing ones to choose HOSTED.
 */
export function checkReportedInfo(
  countryCode: string | undefined,
  method: string | undefined,
  reportedInfo: Partial<Record<string, unknown>> | null | undefined,
): ReportedInfoFailure[] {
  if (!countryCode || !method) return [];
  const rules = REPORTED_INFO_RULES[`${countryCode}:${method}`];
  if (!rules) return [];
  const failures: ReportedInfoFailure[] = [];
  for (const r of rules) {
    const value = reportedInfo?.[r.field];
    const field = `reported_info.${r.field}`;
    if (value === undefined || value === null || value === '') {
      failures.push({ field, rule: `is required for ${countryCode} ${method}`, missing: true });
    } else if (typeof value !== 'string' || !r.format.test(value)) {
      failures.push({ field, rule: r.rule });
    }
  }
  return failures;
}

// ---------------------------------------------------------------- crypto (2.6)

export const cryptoRequestSchema = z.object({
  currency: oneOf(CRYPTO_CURRENCIES),
  wallet: text(128, 1),
  network: z
    .string(needs('a network symbol'))
    .max(12, 'at most 12 characters')
    .refine(
      (s) => (CRYPTO_NETWORKS as readonly string[]).includes(s),
      `must be one of ${CRYPTO_NETWORKS.join(', ')}`,
    ),
});

// ---------------------------------------------------------------- deposit creation (2.3, 2.7)

export const depositBankAccountRequestSchema = z.looseObject({
  bank_code: textOrNumber(45).optional(),
  account_number: text(45).optional(),
  bank_branch: text(45).optional(),
  account_type: text(45).optional(),
  account_holder: text(255).optional(),
});

/**
 * POST /v3/deposits body (2.3). Required here: country, currency and amount (the spec leaves the
 * flags "not shown"; payrecon always sends these three). `expiration` is minutes, up to 5 digits.
 */
export const depositCreateRequestSchema = z
  .object({
    invoice_id: invoiceIdSchema.optional(),
    country: country(),
    currency: currency(),
    amount: amount({ positive: true }),
    merchant_external_reference: text(255).optional(),
    payer: payerRequestSchema.optional(),
    payment_method: methodCode.optional(),
    payment_type: paymentTypeText.optional(),
    payment_types: z.array(paymentTypeText, needs('a list of payment types')).optional(),
    request_payer_data_on_validation_failure: bool().optional(),
    sub_merchant_id: id().optional(),
    allow_installments: bool().optional(),
    reported_info: reportedInfoSchema.optional(),
    bank_account: depositBankAccountRequestSchema.optional(),
    expiration: int({ min: 1, digits: 5 }).optional(),
    fee_on_payer: bool().optional(),
    surcharge_on_payer: bool().optional(),
    bonus_amount: amount().optional(),
    bonus_relative: bool().optional(),
    strikethrough_price: amount().optional(),
    description: text(100).optional(),
    client_ip: ipAddress().optional(),
    device_id: text(100).optional(),
    language: oneOf(LANGUAGES).optional(),
    back_url: httpsUrl().optional(),
    success_url: httpsUrl().optional(),
    error_url: httpsUrl().optional(),
    notification_url: httpsUrl().optional(),
    logo: httpsUrl().optional(),
    test: bool().optional(),
    mobile: bool().optional(),
    early_release: bool().optional(),
    requested_token: bool().optional(),
    crypto: cryptoRequestSchema.optional(),
  })
  .superRefine((req, ctx) => {
    checkDocumentType(req.country, req.payer, ctx);
    for (const f of checkReportedInfo(req.country, req.payment_method, req.reported_info)) {
      if (f.missing || typeof req.reported_info !== 'object') continue;
      ctx.addIssue({ code: 'custom', path: f.field.split('.'), message: f.rule });
    }
  }, ALWAYS);
export type DepositCreateRequest = z.output<typeof depositCreateRequestSchema>;
export type DepositCreateRequestInput = z.input<typeof depositCreateRequestSchema>;

const metadataSchema = z.record(z.string(), z.unknown());

export const paymentInfoSchema = z.looseObject({
  type: text().optional(),
  payment_method: text().optional(),
  payment_method_name: text().optional(),
  amount: amount(),
  currency: currency(),
  expiration_date: pattern(DATE_TIME_TEXT, 'must be a date-time yyyy-MM-dd HH:mm:ss').optional(),
  created_at: pattern(DATE_TIME_TEXT, 'must be a date-time yyyy-MM-dd HH:mm:ss').optional(),
  metadata: metadataSchema.optional(),
});

/** POST /v3/deposits answer (2.7): ONE_SHOT with payment_info, or HOSTED with a redirect_url. */
export const depositCreateResponseSchema = z.looseObject({
  checkout_type: oneOf(CHECKOUT_TYPES),
  redirect_url: z.string(needs('a URL')).url('must be a URL').optional(),
  deposit_id: id(),
  user_id: textOrNumber(),
  merchant_invoice_id: text(128),
  payment_info: paymentInfoSchema.optional(),
  secondary_metadata: metadataSchema.optional(),
  checkout_token: text().optional(),
});
export type DepositCreateResponse = z.output<typeof depositCreateResponseSchema>;

// ---------------------------------------------------------------- deposit status view (2.1, 2.2)

const payerAddressSchema = z.looseObject({
  city: text().nullish(),
  state: text().nullish(),
  street: text().nullish(),
  zip_code: text().nullish(),
});

export const payerViewSchema = z.looseObject({
  document: text().nullish(),
  document_type: text().nullish(),
  email: text().nullish(),
  first_name: text().nullish(),
  last_name: text().nullish(),
  phone: text().nullish(),
  address: payerAddressSchema.nullish(),
});

export const cardDetailSchema = z.looseObject({
  card_holder: text().nullish(),
  brand: text().nullish(),
  masked_card: text().nullish(),
  expiration: pattern(/^\d{4}-\d{2}$/, 'must be YYYY-MM').nullish(),
  card_type: oneOf(CARD_TYPES).nullish(),
  transaction_result: text().nullish(),
});

export const cryptoViewSchema = z.looseObject({
  currency: text().nullish(),
  wallet: text().nullish(),
  network: text().nullish(),
  crypto_fx: decimalText().nullish(),
  crypto_amount: decimalText().nullish(),
});

/**
 * GET /v3/deposits/{id} answer (2.1). The trailing optional fields (`test`, `fee_on_payer`,
 * `created_at`, `expiration_date`, `crypto`) are not in 2.1; payrecon reads them when present.
 */
export const depositSchema = z.looseObject({
  user_id: textOrNumber(),
  deposit_id: id(),
  subscription_id: id().nullish(),
  invoice_id: text(128),
  country: country().nullish(),
  currency: currency(),
  local_amount: amount().nullish(),
  usd_amount: amount().nullish(),
  amount: amount().nullish(),
  bonus_amount: amount().nullish(),
  bonus_relative: bool().nullish(),
  payment_method: text().nullish(),
  payment_type: text().nullish(),
  status: oneOf(DEPOSIT_STATUSES),
  status_reason: oneOf(STATUS_REASONS).nullish(),
  payer: payerViewSchema.nullish(),
  fee_amount: amount().nullish(),
  fee_currency: currency().nullish(),
  refunded: bool().nullish(),
  current_payer_verification: oneOf(PAYER_VERIFICATIONS).nullish(),
  card_detail: cardDetailSchema.nullish(),
  financial_institution: z
    .looseObject({
      name: text().nullish(),
      bank_code: textOrNumber().nullish(),
      tax_identifier: text().nullish(),
    })
    .nullish(),
  bank_account: z
    .looseObject({
      bank_code: textOrNumber().nullish(),
      account_number: text().nullish(),
      bank_branch: text().nullish(),
      ispb_code: int().nullish(),
      bank_name: text().nullish(),
      account_type: text().nullish(),
      account_holder: text().nullish(),
    })
    .nullish(),
  completed_payment_method_code: text().nullish(),
  test: bool().nullish(),
  fee_on_payer: bool().nullish(),
  created_at: text().nullish(),
  expiration_date: text().nullish(),
  crypto: cryptoViewSchema.nullish(),
  /** Not in 2.1: what the customer paid beside an AMOUNT_MISMATCH; read when present, kept as text. */
  paid_amount: decimalText().nullish(),
});
export type Deposit = z.output<typeof depositSchema>;

// ---------------------------------------------------------------- card deposit (2.8)

export const creditCardSchema = z.object({
  cvv: pattern(/^\d{3,4}$/, 'must be 3 to 4 digits', 4),
  card_number: pattern(/^\d{1,16}$/, 'must be up to 16 digits', 16),
  expiration_month: expirationMonth,
  expiration_year: expirationYear,
  holder_name: text(256, 1),
});

/**
 * POST {cc_base_url}/v3/deposits body (2.8). Either `credit_card` or `card_token` must be sent.
 * `currency` defaults to USD at the provider; payrecon sends it explicitly but accepts it absent.
 */
export const cardDepositRequestSchema = z
  .object({
    country: country(),
    amount: amount({ positive: true }),
    currency: currency().optional(),
    installments: int({ min: 1, max: 12 }).optional(),
    invoice_id: invoiceIdSchema.optional(),
    payer: cardPayerRequestSchema,
    credit_card: creditCardSchema.optional(),
    card_token: text(50, 1).optional(),
    description: text(100).optional(),
    client_ip: ipAddress(),
    device_id: text(100).optional(),
    fee_on_payer: bool().optional(),
    sub_merchant_id: id().optional(),
  })
  .superRefine((req, ctx) => {
    checkDocumentType(req.country, req.payer, ctx);
    if (!req.credit_card && !req.card_token) {
      ctx.addIssue({
        code: 'custom',
        path: ['credit_card'],
        message: 'credit_card or card_token is required',
      });
    }
  }, ALWAYS);
export type CardDepositRequest = z.output<typeof cardDepositRequestSchema>;
export type CardDepositRequestInput = z.input<typeof cardDepositRequestSchema>;

export const cardDepositResponseSchema = z.looseObject({
  deposit_id: id(),
  user_id: textOrNumber(),
  merchant_invoice_id: text(128),
  payment_info: z.looseObject({
    type: text(),
    result: oneOf(CARD_RESULTS),
    reason: text().nullish(),
    reason_code: text().nullish(),
    payment_method: text().nullish(),
    payment_method_name: text().nullish(),
    amount: amount(),
    currency: currency(),
    created_at: text().nullish(),
  }),
  authentication_url: z.string(needs('a URL')).url('must be a URL').optional(),
});
export type CardDepositResponse = z.output<typeof cardDepositResponseSchema>;

// ---------------------------------------------------------------- cashouts (2.9, 4.4-4.6, docs/provider.md)

const login = text(32, 1);
const pass = text(32, 1);
const externalId = text(100, 1);

/** POST /v3/cashout body (docs/provider.md). */
export const cashoutCreateRequestSchema = z
  .object({
    login,
    pass,
    external_id: externalId,
    country: country(),
    currency: currency().optional(),
    amount: amount({ positive: true }),
    document_id: text(30, 1),
    document_type: documentType.optional(),
    beneficiary_name: text(255, 1),
    beneficiary_lastname: text(255).optional(),
    email: email().optional(),
    phone: phone().optional(),
    bank_code: textOrNumber(45).optional(),
    bank_account: text(45).optional(),
    bank_branch: text(45).optional(),
    account_type: oneOf(ACCOUNT_TYPES).optional(),
    address: text(255).optional(),
    city: text(128).optional(),
    postal_code: text(16).optional(),
    beneficiary_birthdate: compactDate().optional(),
    comments: text(255).optional(),
    on_hold: bool().optional(),
    type: text(32).optional(),
    notification_url: webUrl(),
  })
  .superRefine((req, ctx) => {
    if (typeof req.document_type !== 'string') return;
    const allowed = (DOCUMENT_TYPES as Record<string, readonly string[]>)[req.country];
    if (allowed && !allowed.includes(req.document_type)) {
      ctx.addIssue({
        code: 'custom',
        path: ['document_type'],
        message: `must be a document type of ${req.country}: ${allowed.join(', ')}`,
      });
    }
  }, ALWAYS);
export type CashoutCreateRequest = z.output<typeof cashoutCreateRequestSchema>;
export type CashoutCreateRequestInput = z.input<typeof cashoutCreateRequestSchema>;

/** `{"cashout_id": "8405147"}`: the id arrives as a string in the examples; string or number accepted. */
export const cashoutCreateResponseSchema = z.looseObject({
  cashout_id: id(),
});
export type CashoutCreateResponse = z.output<typeof cashoutCreateResponseSchema>;

function requireAnId(
  req: { cashout_id?: number | undefined; external_id?: string | undefined },
  ctx: z.RefinementCtx,
) {
  if (req.cashout_id === undefined && req.external_id === undefined) {
    ctx.addIssue({ code: 'custom', path: ['cashout_id'], message: 'cashout_id or external_id is required' });
  }
}

/** POST /v3/cashout/status body (4.4): either id identifies the cashout; both must then agree. */
export const cashoutStatusRequestSchema = z
  .object({ login, pass, cashout_id: id().optional(), external_id: externalId.optional() })
  .superRefine(requireAnId, ALWAYS);
export type CashoutStatusRequest = z.output<typeof cashoutStatusRequestSchema>;
export type CashoutStatusRequestInput = z.input<typeof cashoutStatusRequestSchema>;

const cashoutStatusCode = int().refine(
  (n) => (Object.values(CASHOUT_STATUS_CODES) as number[]).includes(n),
  'must be a cashout status code from 0 to 5',
);

export const cashoutBankSchema = z.looseObject({
  code: textOrNumber().nullish(),
  name: text().nullish(),
  branch: textOrNumber().nullish(),
  account: textOrNumber().nullish(),
  beneficiary_name: text().nullish(),
});

/** POST /v3/cashout/status answer (2.9). */
export const cashoutStatusResponseSchema = z.looseObject({
  cashout_id: id().nullish(),
  external_id: text().nullish(),
  cashout_status: cashoutStatusCode,
  cashout_status_description: text().nullish(),
  provider_external_reference: text().nullish(),
  bank: z.array(cashoutBankSchema).nullish(),
  rejection_code: int().nullish(),
  rejection_reason: text().nullish(),
  /** Not in 2.9; read when present. */
  amount: amount().nullish(),
  currency: currency().nullish(),
});
export type CashoutStatusResponse = z.output<typeof cashoutStatusResponseSchema>;

/** PUT /v3/cashout/status body (4.5): all fields required; status PENDING or ON_HOLD. */
export const cashoutUpdateRequestSchema = z.object({
  login,
  pass,
  cashout_id: id(),
  status: oneOf(CASHOUT_UPDATE_STATUSES),
});
export type CashoutUpdateRequest = z.output<typeof cashoutUpdateRequestSchema>;
export type CashoutUpdateRequestInput = z.input<typeof cashoutUpdateRequestSchema>;

export const cashoutUpdateResponseSchema = z.looseObject({
  cashout_status: cashoutStatusCode,
  cashout_status_description: text().nullish(),
  rejection_code: int().nullish(),
  rejection_reason: text().nullish(),
});
export type CashoutUpdateResponse = z.output<typeof cashoutUpdateResponseSchema>;

/** DELETE /v3/cashout/cancel body (4.6): both ids as documented, or either alone (docs/provider.md). */
export const cashoutCancelRequestSchema = z
  .object({ login, pass, cashout_id: id().optional(), external_id: externalId.optional() })
  .superRefine(requireAnId, ALWAYS);
export type CashoutCancelRequest = z.output<typeof cashoutCancelRequestSchema>;
export type CashoutCancelRequestInput = z.input<typeof cashoutCancelRequestSchema>;

export const cashoutCancelResponseSchema = z.looseObject({
  cashout_status: cashoutStatusCode,
  cashout_status_description: text().nullish(),
});
export type CashoutCancelResponse = z.output<typeof cashoutCancelResponseSchema>;

// ---------------------------------------------------------------- refunds (2.10, docs/provider.md)

export const refundBankAccountSchema = z.object({
  beneficiary: text(255, 1).optional(),
  bank_code: textOrNumber(45).optional(),
  branch: text(45).optional(),
  account_number: text(45).optional(),
  account_type: text(45).optional(),
});

/** POST /v3/refunds body (docs/provider.md). No amount: full refund. */
export const refundCreateRequestSchema = z.object({
  deposit_id: id(),
  invoice_id: invoiceIdSchema.optional(),
  amount: amount({ positive: true }).optional(),
  bank_account: refundBankAccountSchema.optional(),
  comments: text(255).optional(),
  notification_url: httpsUrl().optional(),
});
export type RefundCreateRequest = z.output<typeof refundCreateRequestSchema>;
export type RefundCreateRequestInput = z.input<typeof refundCreateRequestSchema>;

export const refundCreateResponseSchema = z.looseObject({
  refund_id: id(),
  refund_info: z
    .looseObject({
      type: text().nullish(),
      result: text().nullish(),
      reason: text().nullish(),
      reason_code: text().nullish(),
      payment_method: text().nullish(),
      payment_method_name: text().nullish(),
      amount: amount().nullish(),
      currency: currency().nullish(),
      created_at: text().nullish(),
    })
    .nullish(),
});
export type RefundCreateResponse = z.output<typeof refundCreateResponseSchema>;

/** GET /v3/refunds/{id} answer (2.10); `voucher` (base64 PDF) only with `?voucher=true`. */
export const refundSchema = z.looseObject({
  refund_id: id().nullish(),
  deposit_id: id(),
  merchant_invoice_id: text().nullish(),
  status: oneOf(REFUND_STATUSES),
  amount: amount(),
  currency: currency().nullish(),
  voucher: pattern(/^[A-Za-z0-9+/=\r\n]*$/, 'must be base64').nullish(),
});
export type Refund = z.output<typeof refundSchema>;

// ---------------------------------------------------------------- banks (2.11, 4.8)

/** Bank codes are numbers in 2.11 but sent as text in bank_code; kept as the text given. */
export const bankSchema = z.looseObject({ code: textOrNumber(), name: text() });
export const banksResponseSchema = z.array(bankSchema, needs('a list of banks'));
export type Bank = z.output<typeof bankSchema>;

// ---------------------------------------------------------------- errors (7.1, 7.2, 7.4)

/** Deposit creation error (7.1); `code`/`type` appear on header errors (100-105). */
export const depositErrorSchema = z.looseObject({
  code: int().optional(),
  type: text().optional(),
  description: text(),
  details: z.array(text()).optional(),
  reason: text().optional(),
  reason_code: text().optional(),
});
export type DepositError = z.output<typeof depositErrorSchema>;

/** Card deposit / refund error (7.2). */
export const providerErrorSchema = z.looseObject({
  code: int(),
  description: text(),
  details: z.array(text()).optional(),
  type: text().optional(),
});
export type ProviderErrorBody = z.output<typeof providerErrorSchema>;

/** Cashout error (7.4). */
export const cashoutErrorSchema = z.looseObject({
  code: int(),
  message: text(),
});
export type CashoutError = z.output<typeof cashoutErrorSchema>;

// ---------------------------------------------------------------- notifications (docs/provider.md)

/** Deposit webhook: `{"deposit_id": 3000000001}`, no status. */
export const depositNotificationSchema = z.looseObject({ deposit_id: id() });
export type DepositNotification = z.output<typeof depositNotificationSchema>;

/** Refund webhook: `{"refund_id": 168284}`. */
export const refundNotificationSchema = z.looseObject({ refund_id: id() });
export type RefundNotification = z.output<typeof refundNotificationSchema>;

/**
 * Cashout webhook, form-encoded (every value is text): `date` is `YYYY-MM-DD HH:MM:SS` GMT; `control`
 * is the uppercase HMAC of `Be4 + external_id + Bo7` (`verifyCashoutControl`).
 */
export const cashoutNotificationSchema = z.looseObject({
  cashout_id: id(),
  external_id: externalId,
  control: pattern(/^[0-9A-Fa-f]{64}$/, 'must be 64 hex characters'),
  date: pattern(DATE_TIME_TEXT, 'must be a date-time YYYY-MM-DD HH:MM:SS').optional(),
  bank_reference_id: text().optional(),
  comments: text().optional(),
  status_reason: text().optional(),
});
export type CashoutNotification = z.output<typeof cashoutNotificationSchema>;

// ---------------------------------------------------------------- issue formatting

export interface FieldIssue {
  /** Dotted path (`payer.address.state`, `bank[0].code`); `body` for the whole value. */
  field: string;
  rule: string;
}

function pathText(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out === '' ? 'body' : out;
}

/** The issue's rule text; zod's own generic messages are replaced by rule-style ones. */
function ruleText(issue: z.core.$ZodIssue): string {
  if (!issue.message.startsWith('Invalid input') && !issue.message.startsWith('Unrecognized key')) {
    return issue.message;
  }
  if (issue.code === 'invalid_type') {
    if (issue.input === undefined && issue.message.includes('received undefined')) return 'is required';
    if (issue.expected === 'object') return 'must be an object';
    if (issue.expected === 'array') return 'must be a list';
    return `must be ${issue.expected}`;
  }
  if (issue.code === 'unrecognized_keys') return `unknown field ${issue.keys.join(', ')}`;
  return 'has an invalid value';
}

/** Flattens a zod error into `{ field, rule }` pairs, in order, without duplicates. */
export function formatZodIssues(error: z.ZodError | { issues: readonly z.core.$ZodIssue[] }): FieldIssue[] {
  const out: FieldIssue[] = [];
  const seen = new Set<string>();
  for (const issue of error.issues) {
    const item = { field: pathText(issue.path), rule: ruleText(issue) };
    const key = `${item.field}\u0000${item.rule}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(item);
    }
  }
  return out;
}

/** Lines `field: rule`, e.g. `payer.email: must be a valid e-mail address`. */
export function validationMessages(
  error: z.ZodError | { issues: readonly z.core.$ZodIssue[] } | readonly FieldIssue[],
): string[] {
  const issues = Array.isArray(error)
    ? (error as readonly FieldIssue[])
    : formatZodIssues(error as z.ZodError);
  return issues.map((i) => `${i.field}: ${i.rule}`);
}
