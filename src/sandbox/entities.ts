/**
 * What the sandbox stores: one record per deposit, cashout and refund, each with its full status
 * history. Amounts are minor units. Card numbers and CVVs are never stored (only brand, masked number,
 * holder and expiry, as the provider's status view shows them).
 */
import type { Minor } from '../domain/money.ts';
import type { CashoutStatus, DepositStatus, RefundStatus } from '../domain/statuses.ts';

export interface HistoryEntry {
  from: string | null;
  to: string;
  /** Sandbox time, ISO 8601. */
  at: string;
  /** What moved it: api, control, auto, clock, checkout, ... */
  trigger: string;
  reason?: string | null;
}

interface BaseRecord {
  id: number;
  account: string;
  createdAt: number;
  updatedAt: number;
  notificationUrl: string | null;
  history: HistoryEntry[];
  /** Serialized status body, dropped on every change (the status endpoints answer from it). */
  cachedBody?: string | undefined;
}

export interface CardInfo {
  brand: string;
  maskedCard: string;
  holder: string;
  expiration: string;
  cardType: 'CREDIT' | 'DEBIT';
  transactionResult: string;
  reasonCode: string | null;
  reason: string | null;
  installments: number | null;
}

export interface DepositRecord extends BaseRecord {
  kind: 'deposit';
  status: DepositStatus;
  invoiceId: string;
  userId: string;
  country: string;
  currency: string;
  amount: Minor;
  usdAmount: Minor;
  /** Amount actually paid by the customer when it differs (AMOUNT_MISMATCH). */
  paidAmount: Minor | null;
  paymentMethod: string | null;
  paymentType: string | null;
  checkoutType: 'ONE_SHOT' | 'HOSTED' | 'CARD';
  statusReason: 'THIRD_PARTY_PAYER' | 'AMOUNT_MISMATCH' | null;
  payer: Record<string, unknown> | null;
  reportedInfo: Record<string, unknown> | null;
  test: boolean;
  crypto: { currency: string | null; wallet: string; network: string } | null;
  feeOnPayer: boolean;
  feeAmount: Minor;
  earlyRelease: boolean;
  expiresAt: number | null;
  card: CardInfo | null;
  /** Token of the hosted checkout or 3DS page. */
  pageToken: string;
  /** Payment types the hosted checkout offers (payment_type / payment_types); null for all. */
  offeredTypes: string[] | null;
  /** Request fields the hosted checkout still has to collect. */
  missing: string[];
  bonusAmount: Minor | null;
  bonusRelative: boolean | null;
  description: string | null;
  merchantExternalReference: string | null;
  subMerchantId: number | null;
  payerVerification: string | null;
  completedPaymentMethodCode: string | null;
  bankAccount: Record<string, unknown> | null;
  successUrl: string | null;
  backUrl: string | null;
  refundedAmount: Minor;
  everCompleted: boolean;
  everEarlyReleased: boolean;
  /** Sandbox time of a planned late payment (automatic mode, `lateCompletionRate`). */
  lateCompletionAt?: number | null;
}

export interface CashoutRecord extends BaseRecord {
  kind: 'cashout';
  status: CashoutStatus;
  externalId: string;
  country: string;
  currency: string;
  amount: Minor;
  documentId: string;
  documentType: string | null;
  beneficiaryName: string;
  beneficiaryLastname: string | null;
  email: string | null;
  phone: string | null;
  bankCode: string | null;
  bankName: string | null;
  bankAccount: string | null;
  bankBranch: string | null;
  accountType: string | null;
  comments: string | null;
  type: string | null;
  rejectionCode: number | null;
  rejectionReason: string | null;
  providerExternalReference: string | null;
  everCompleted: boolean;
  /** Webhook body field (cashout notifications carry no status). */
  statusReason: string | null;
  /** Sandbox time of a planned late rejection (faults, `lateRejection`). */
  lateRejectAt?: number | null;
}

export interface RefundRecord extends BaseRecord {
  kind: 'refund';
  status: RefundStatus;
  depositId: number;
  invoiceId: string;
  currency: string;
  amount: Minor;
  isCard: boolean;
  bankAccount: Record<string, unknown> | null;
  comments: string | null;
  everCompleted: boolean;
  rejectionCode: string | null;
  rejectionReason: string | null;
  /** Sandbox time of a planned late rejection (faults, `lateRejection`). */
  lateRejectAt?: number | null;
}

export type AnyRecord = DepositRecord | CashoutRecord | RefundRecord;
