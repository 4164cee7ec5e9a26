import { describe, expect, it } from 'vitest';
import { bankCsv, camt053, dayStatement, escapeXml, isIban } from './bank-statement.ts';
import { type BankEntry, formatRate, generatedIban } from './settlements.ts';

const account = { id: 'NL00TEST', account: 'shop', currency: 'BRL', opened: '2026-03-01', opening: -500n };

function entry(seq: number, bookingDate: string, amount: bigint, extra: Partial<BankEntry> = {}): BankEntry {
  return {
    ref: `BK${seq}`,
    seq,
    bankAccount: 'NL00TEST',
    account: 'shop',
    currency: 'BRL',
    bookingDate,
    valueDate: bookingDate,
    amount,
    reversal: false,
    fee: 0n,
    txs: [{ endToEndId: `STL-${seq}`, amount, settlementId: String(seq), remittance: 'r' }],
    counterparty: 'PSP',
    description: 'd',
    ...extra,
  };
}

describe('bank statement', () => {
  it('escapes markup and drops characters XML cannot carry', () => {
    expect(escapeXml(`a & b <c> "d" 'e'\u0001`)).toBe('a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos;');
  });

  it('opens with the balance of every earlier entry and closes with the day booked', () => {
    const entries = [
      entry(1, '2026-03-01', 1000n),
      entry(3, '2026-03-02', -2500n),
      entry(2, '2026-03-02', 700n),
    ];
    const s = dayStatement(account, entries, '2026-03-02');
    expect([s.opening, s.closing, s.entries.map((e) => e.seq), s.sequence]).toEqual([
      500n,
      -1300n,
      [2, 3],
      2,
    ]);
    const xml = camt053([s], {
      version: 'camt.053.001.02',
      createdAt: Date.UTC(2026, 2, 3),
      ownerName: 'A & B',
    });
    expect(xml).toContain('<Nm>A &amp; B</Nm>');
    expect(xml).toMatch(/<Cd>CLBD<\/Cd>[\s\S]*?<Amt Ccy="BRL">13.00<\/Amt>\s*<CdtDbtInd>DBIT<\/CdtDbtInd>/);
    expect(xml).toContain('<Othr>');
    expect(bankCsv([s])).toBe(
      'booking_date,value_date,amount,currency,reference,end_to_end_id,counterparty,description,balance_after\n' +
        '2026-03-02,2026-03-02,7.00,BRL,BK2,STL-2,PSP,d,12.00\n' +
        '2026-03-02,2026-03-02,-25.00,BRL,BK3,STL-3,PSP,d,-13.00\n',
    );
  });

  it('writes rates with at least six decimals and generates valid IBANs', () => {
    expect(formatRate(10_000_000_000n)).toBe('1.000000');
    expect(formatRate(1_862_000_000n)).toBe('0.186200');
    expect(formatRate(2_000_000_001n)).toBe('0.2000000001');
    const iban = generatedIban('sandbox', 'BRL');
    expect(iban).toMatch(/^NL\d{2}SBOX\d{10}$/);
    expect(isIban(iban)).toBe(true);
    expect(isIban('GB82WEST12345698765432')).toBe(true);
    expect(isIban('GB83WEST12345698765432')).toBe(false);
  });
});
