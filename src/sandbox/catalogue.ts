/**
 * The sandbox's catalogue of countries, currencies, payment methods, banks and test cards, loaded once
 * from `catalogue.json` (one data file, documented in src/sandbox/README.md).
 */
import { readFileSync } from 'node:fs';

export type MetadataKind = 'bank_deposit' | 'voucher' | 'instant' | 'hosted_only';

export interface CountryInfo {
  name: string;
  currency: string;
  states: string[];
  zipPattern: string;
  phonePattern: string;
}

export interface PaymentMethodInfo {
  code: string;
  name: string;
  type: string;
  countries: string[];
  /** How ONE_SHOT payment details look; `hosted_only` methods always answer HOSTED. */
  metadata: MetadataKind;
  /** Default (and maximum) expiration in minutes. */
  expirationMinutes: number;
  /** Fee in basis points of the amount. */
  feeBps: number;
  /** Minimum fields for a ONE_SHOT answer (rule 4.1.4), as dotted request paths. */
  requires: string[];
  /** Payer values (phone, address.state, address.zip_code) the method needs (rule 4.1.6). */
  requiresValues: string[];
}

export interface CardBrandInfo {
  brand: string;
  method: string;
  prefixes: string[];
  lengths: number[];
}

export interface TestCard {
  number: string;
  brand: string;
  result: 'REJECTED' | 'PENDING_AUTHENTICATION';
  reasonCode?: string;
  reason?: string;
}

export interface Catalogue {
  countries: Record<string, CountryInfo>;
  currencies: Record<string, { name: string; usdRate: string }>;
  paymentMethods: PaymentMethodInfo[];
  cardBrands: CardBrandInfo[];
  testCards: TestCard[];
  cryptoCurrencies: string[];
  cryptoNetworks: string[];
  banks: Record<string, { code: number; name: string }[]>;
}

export interface CatalogueIndex extends Catalogue {
  method(code: string): PaymentMethodInfo | undefined;
  testCard(number: string): TestCard | undefined;
  brandOf(number: string): CardBrandInfo | undefined;
  zipRegex(country: string): RegExp | undefined;
  phoneRegex(country: string): RegExp | undefined;
}

export const CATALOGUE_PATH = new URL('./catalogue.json', import.meta.url);

export function loadCatalogue(path: URL | string = CATALOGUE_PATH): CatalogueIndex {
  const data = JSON.parse(readFileSync(path, 'utf8')) as Catalogue;
  const methods = new Map(data.paymentMethods.map((m) => [m.code, m]));
  const cards = new Map(data.testCards.map((c) => [c.number, c]));
  const zips = new Map(Object.entries(data.countries).map(([k, c]) => [k, new RegExp(c.zipPattern)]));
  const phones = new Map(Object.entries(data.countries).map(([k, c]) => [k, new RegExp(c.phonePattern)]));
  return {
    ...data,
    method: (code) => methods.get(code),
    testCard: (number) => cards.get(number),
    brandOf: (number) =>
      data.cardBrands.find(
        (b) => b.lengths.includes(number.length) && b.prefixes.some((p) => number.startsWith(p)),
      ),
    zipRegex: (country) => zips.get(country),
    phoneRegex: (country) => phones.get(country),
  };
}

/** Luhn checksum of a card number. */
export function luhnValid(number: string): boolean {
  if (!/^\d{12,19}$/.test(number)) return false;
  let sum = 0;
  for (let i = 0; i < number.length; i++) {
    let d = number.charCodeAt(number.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}
