/**
 * The control API's settlement routes (under `/_sandbox/`, registered by control.ts): the settlements
 * and bank anomalies as ground truth, the provider's reports and the merchant's bank statements.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { AppError } from '../domain/errors.ts';
import { formatAmount, type Minor, parseAmount } from '../domain/money.ts';
import { addDays, localDate, zonedTimeToInstant } from '../domain/zoned-time.ts';
import type { AccountRegistry, SandboxAccount } from './accounts.ts';
import { bankCsv, CAMT_VERSIONS, type CamtVersion, camt053, dayStatement } from './bank-statement.ts';
import type { SandboxEngine } from './engine.ts';
import { balancesJson } from './ground-truth.ts';
import {
  instantText,
  reportCsv,
  reportXlsx,
  SETTLEMENT_COLUMNS,
  settlementRows,
  TRANSACTION_COLUMNS,
  transactionRows,
  type Window,
} from './provider-reports.ts';
import { type Settlements, timeZoneOf } from './settlements.ts';

export interface SettlementRouteDeps {
  engine: SandboxEngine;
  accounts: AccountRegistry;
  settlements: Settlements;
  send: (reply: FastifyReply, status: number, value: unknown) => FastifyReply;
  body: (raw: unknown) => Record<string, unknown>;
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;

function accountOf(accounts: AccountRegistry, name: string | undefined): SandboxAccount {
  if (!name) throw new AppError('VALIDATION_FAILED', 'account: is required');
  const account = accounts.named(name);
  if (!account) throw new AppError('NOT_FOUND', `account: unknown account ${name}`);
  return account;
}

/** `from`/`to` as local dates of the account (a whole day each, `to` included) or ISO instants. */
function windowOf(account: SandboxAccount, from: string | undefined, to: string | undefined): Window {
  const tz = timeZoneOf(account);
  const bound = (field: string, text: string | undefined, endOfDay: boolean): number | undefined => {
    if (text === undefined || text === '') return undefined;
    if (DATE.test(text)) return zonedTimeToInstant(endOfDay ? addDays(text, 1) : text, '00:00', tz).getTime();
    const ms = Date.parse(text);
    if (Number.isNaN(ms))
      throw new AppError('VALIDATION_FAILED', `${field}: must be YYYY-MM-DD or an ISO 8601 instant`);
    return ms;
  };
  const w: Window = {};
  const f = bound('from', from, false);
  const t = bound('to', to, true);
  if (f !== undefined) w.from = f;
  if (t !== undefined) w.to = t;
  return w;
}

const text = (m: Minor) => formatAmount(m);

export function registerSettlementRoutes(app: FastifyInstance, deps: SettlementRouteDeps): void {
  const { settlements, send } = deps;

  const settlementJson = () =>
    settlements.list().map((s) => ({
      settlement_id: s.id,
      account: s.account,
      period_start: instantText(s.periodStart),
      period_end: instantText(s.periodEnd),
      currency: s.currency,
      available: text(s.available),
      previously_settled: text(s.previouslySettled),
      gross: text(s.gross),
      settlement_currency: s.settlementCurrency,
      rate: s.rate,
      converted: text(s.converted),
      fees: text(s.fees),
      net: text(s.net),
      value_date: s.valueDate,
      bank_reference: s.bankReference,
      bank_account: s.bankAccount,
    }));

  app.get<{ Querystring: { account?: string } }>('/_sandbox/settlements', async (req, reply) =>
    send(
      reply,
      200,
      settlementJson().filter((s) => !req.query.account || s.account === req.query.account),
    ),
  );

  app.get('/_sandbox/bank-accounts', async (_req, reply) =>
    send(
      reply,
      200,
      Object.values(settlements.meta.bankAccounts).map((b) => ({
        id: b.id,
        account: b.account,
        currency: b.currency,
        opened: b.opened,
        opening_balance: text(b.opening),
      })),
    ),
  );

  app.get('/_sandbox/bank', async (_req, reply) => send(reply, 200, settlements.meta.bank));
  app.put('/_sandbox/bank', async (req, reply) => send(reply, 200, settlements.setBank(deps.body(req.body))));

  app.get('/_sandbox/ground-truth', async (_req, reply) => {
    const settled = new Map<string, Minor>();
    for (const [account, state] of Object.entries(settlements.meta.accounts)) {
      for (const [currency, total] of Object.entries(state.settled))
        settled.set(`${account}\u0000${currency}`, total);
    }
    return send(reply, 200, {
      generated_at: deps.engine.nowIso(),
      balances: balancesJson(deps.engine).map((b) => {
        const done = settled.get(`${b.account}\u0000${b.currency}`) ?? 0n;
        // `available` counts every movement; what the settlements have not swept yet is `unsettled`.
        const available = parseAmount(b.available!, { allowNegative: true });
        return { ...b, settled: text(done), unsettled: text(available - done) };
      }),
      settlements: settlementJson(),
      carryOvers: settlements.meta.carries.map((c) => ({
        account: c.account,
        currency: c.currency,
        cutoff: instantText(c.cutoff),
        available: text(c.available),
        previously_settled: text(c.previouslySettled),
        balance: text(c.balance),
        reason: c.reason,
      })),
      bankAnomalies: settlements.meta.anomalies.map((a) => ({
        kind: a.kind,
        settlementIds: a.settlementIds,
        bankAccount: a.bankAccount,
        ...(a.bankRef !== undefined ? { bankRef: a.bankRef } : {}),
        ...(a.amount !== undefined ? { amount: text(a.amount) } : {}),
        date: a.date,
        ...(a.note !== undefined ? { note: a.note } : {}),
      })),
    });
  });

  const sendReport = async (
    reply: FastifyReply,
    format: string | undefined,
    name: string,
    header: readonly string[],
    rows: string[][],
  ) => {
    if (format === undefined || format === 'csv') {
      return reply
        .code(200)
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="${name}.csv"`)
        .send(reportCsv(header, rows));
    }
    if (format === 'xlsx') {
      return reply
        .code(200)
        .type('application/vnd.openxmlformats-officedocument.spreadsheetml.sheet')
        .header('content-disposition', `attachment; filename="${name}.xlsx"`)
        .send(
          await reportXlsx(name.startsWith('settlements') ? 'Settlements' : 'Transactions', header, rows),
        );
    }
    throw new AppError('VALIDATION_FAILED', 'format: must be csv or xlsx');
  };

  type ReportQuery = { Querystring: { account?: string; from?: string; to?: string; format?: string } };

  app.get<ReportQuery>('/_sandbox/reports/transactions', async (req, reply) => {
    const account = accountOf(deps.accounts, req.query.account);
    const window = windowOf(account, req.query.from, req.query.to);
    const rows = transactionRows(deps.engine, settlements.list(account.name), account.name, window);
    return sendReport(reply, req.query.format, `transactions-${account.name}`, TRANSACTION_COLUMNS, rows);
  });

  app.get<ReportQuery>('/_sandbox/reports/settlements', async (req, reply) => {
    const account = accountOf(deps.accounts, req.query.account);
    const window = windowOf(account, req.query.from, req.query.to);
    const rows = settlementRows(settlements.list(account.name), account.name, window);
    return sendReport(reply, req.query.format, `settlements-${account.name}`, SETTLEMENT_COLUMNS, rows);
  });

  app.get<{ Querystring: { account?: string; date?: string; format?: string; currency?: string } }>(
    '/_sandbox/bank-statements',
    async (req, reply) => {
      const account = accountOf(deps.accounts, req.query.account);
      const date = req.query.date ?? '';
      if (!DATE.test(date) || Number.isNaN(Date.parse(`${date}T00:00:00Z`)))
        throw new AppError('VALIDATION_FAILED', 'date: must be YYYY-MM-DD');
      const format = req.query.format ?? 'camt.053.001.08';
      if (format !== 'csv' && !CAMT_VERSIONS.includes(format as CamtVersion)) {
        throw new AppError('VALIDATION_FAILED', `format: must be csv or one of ${CAMT_VERSIONS.join(', ')}`);
      }
      const tz = timeZoneOf(account);
      const now = deps.engine.clock.now();
      if (zonedTimeToInstant(addDays(date, 1), '00:00', tz).getTime() > now) {
        throw new AppError(
          'CONFLICT',
          `date: the bank has not closed ${date} yet (sandbox day ${localDate(new Date(now), tz)} in ${tz})`,
        );
      }
      const statements = Object.values(settlements.meta.bankAccounts)
        .filter(
          (b) => b.account === account.name && (!req.query.currency || b.currency === req.query.currency),
        )
        .sort((a, b) => a.id.localeCompare(b.id))
        .map((b) => dayStatement(b, settlements.entries.values(), date));
      const name = `statement-${account.name}-${date}`;
      if (format === 'csv') {
        return reply
          .code(200)
          .type('text/csv; charset=utf-8')
          .header('content-disposition', `attachment; filename="${name}.csv"`)
          .send(bankCsv(statements));
      }
      return reply
        .code(200)
        .type('application/xml; charset=utf-8')
        .header('content-disposition', `attachment; filename="${name}.xml"`)
        .send(
          camt053(statements, { version: format as CamtVersion, createdAt: now, ownerName: account.name }),
        );
    },
  );
}
