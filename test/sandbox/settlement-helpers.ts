/**
 * Helpers of the settlement tests: money in and out of the default account over HTTP, the control
 * API's settlement views, and a DOM-free reading of camt.053 through saxes (a SAX parser).
 */
import { parse } from 'csv-parse/sync';
import { SaxesParser } from 'saxes';
import { expect } from 'vitest';
import { cashoutBody, cashoutCall, control, get, oneShotBody, signed } from './helpers.ts';

export const NO_BANK_ANOMALIES = {
  lateCreditRate: 0,
  batchedCreditRate: 0,
  bankFeeRate: 0,
  missingCreditRate: 0,
  returnedCreditRate: 0,
  unrelatedLineRate: 0,
};

/** A PIX deposit of `amount` (fee 1.5%) paid in full: it reaches the balance. */
export async function paidDeposit(url: string, amount: number): Promise<number> {
  const created = await signed(url, '/v3/deposits', { body: oneShotBody({ amount }) });
  expect(created.status).toBe(200);
  const id = created.json.deposit_id as number;
  const paid = await control(url, `/deposits/${id}/pay`, {});
  expect(paid.status).toBe(200);
  return id;
}

/** A cashout of `amount`: it leaves the balance when created. */
export async function cashout(url: string, amount: number): Promise<number> {
  const res = await cashoutCall(url, '/v3/cashout', cashoutBody({ amount }));
  expect(res.status).toBe(200);
  return Number(res.json.cashout_id);
}

export interface SettlementJson {
  settlement_id: string;
  account: string;
  period_start: string;
  period_end: string;
  currency: string;
  available: string;
  previously_settled: string;
  gross: string;
  settlement_currency: string;
  rate: string;
  converted: string;
  fees: string;
  net: string;
  value_date: string;
  bank_reference: string;
  bank_account: string;
}

export async function settlementsOf(url: string): Promise<SettlementJson[]> {
  const res = await control(url, '/settlements');
  expect(res.status).toBe(200);
  return res.json as SettlementJson[];
}

export async function groundTruth(url: string) {
  const res = await control(url, '/ground-truth');
  expect(res.status).toBe(200);
  return res.json as {
    balances: Record<string, string>[];
    settlements: SettlementJson[];
    carryOvers: Record<string, string>[];
    bankAnomalies: {
      kind: string;
      settlementIds: string[];
      bankAccount: string;
      bankRef?: string;
      amount?: string;
      date: string;
    }[];
  };
}

/** Minor units of decimal text (test arithmetic only; the code under test never uses floats either). */
export function cents(text: string): bigint {
  const negative = text.startsWith('-');
  const [int = '0', frac = ''] = text.replace('-', '').split('.');
  const value = BigInt(int) * 100n + BigInt(frac.padEnd(2, '0'));
  return negative ? -value : value;
}

export async function csvOf(url: string): Promise<Record<string, string>[]> {
  const res = await get(url);
  expect(res.status).toBe(200);
  return parse(res.text, { columns: true }) as Record<string, string>[];
}

export interface XmlNode {
  name: string;
  attrs: Record<string, string>;
  children: XmlNode[];
  text: string;
}

/** Parses XML into a small tree with saxes (well-formedness errors throw). */
export function parseXml(xml: string): XmlNode {
  const parser = new SaxesParser({ xmlns: false });
  const root: XmlNode = { name: '#document', attrs: {}, children: [], text: '' };
  const stack: XmlNode[] = [root];
  parser.on('opentag', (tag) => {
    const node: XmlNode = {
      name: tag.name,
      attrs: tag.attributes as Record<string, string>,
      children: [],
      text: '',
    };
    stack[stack.length - 1]!.children.push(node);
    stack.push(node);
  });
  parser.on('text', (t) => {
    stack[stack.length - 1]!.text += t;
  });
  parser.on('closetag', () => {
    stack.pop();
  });
  parser.on('error', (err) => {
    throw err;
  });
  parser.write(xml).close();
  return root.children[0]!;
}

export function child(node: XmlNode, ...path: string[]): XmlNode | undefined {
  let cur: XmlNode | undefined = node;
  for (const name of path) cur = cur?.children.find((c) => c.name === name);
  return cur;
}

export function children(node: XmlNode, name: string): XmlNode[] {
  return node.children.filter((c) => c.name === name);
}

export const textAt = (node: XmlNode, ...path: string[]): string => child(node, ...path)?.text.trim() ?? '';

/** Signed minor units of an `Amt` + `CdtDbtInd` pair under `node`. */
export function signedAmount(node: XmlNode, amtName = 'Amt'): bigint {
  const value = cents(textAt(node, amtName));
  return textAt(node, 'CdtDbtInd') === 'DBIT' ? -value : value;
}
