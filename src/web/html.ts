/**
 * Server-rendered HTML without a template engine: `html` is a tagged template that escapes every
 * interpolated value unless it is already `SafeHtml` (the result of another `html` call or `raw`).
 * So a page is plain template literals and nothing a user typed can become markup.
 */
import { formatAmount, type Minor } from '../domain/money.ts';

export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Escapes text for use in element content and in quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c] ?? c);
}

type Interpolation =
  | SafeHtml
  | string
  | number
  | bigint
  | boolean
  | null
  | undefined
  | readonly Interpolation[];

function render(value: Interpolation): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map((v) => render(v as Interpolation)).join('');
  return escapeHtml(String(value));
}

/** Tagged template: escapes interpolations, keeps nested `html` fragments as they are. */
export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) {
    out += render(values[i]) + (strings[i + 1] ?? '');
  }
  return new SafeHtml(out);
}

/** Marks trusted markup (constants only, never user input). */
export function raw(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

/** `1234567n` (minor units) becomes `12,345.67`; exact, no float on the way. */
export function formatMoney(minor: Minor): string {
  const text = formatAmount(minor);
  const negative = text.startsWith('-');
  const [integer = '0', fraction = '00'] = (negative ? text.slice(1) : text).split('.');
  const grouped = integer.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${negative ? '-' : ''}${grouped}.${fraction}`;
}

/**
 * One formatter per time zone: building an `Intl.DateTimeFormat` costs far more than formatting with one,
 * and a page of 500 exceptions formats a few thousand instants (0.85 s a page at a year's size before).
 */
const dateTimeFormats = new Map<string, Intl.DateTimeFormat>();

/** Formats an instant as `2026-11-21 14:05` in the given IANA time zone. */
export function formatDateTime(date: Date | null | undefined, timeZone: string): string {
  if (!date) return '';
  let format = dateTimeFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-CA', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    });
    dateTimeFormats.set(timeZone, format);
  }
  const parts = format.formatToParts(date);
  const get = (type: string): string => parts.find((p) => p.type === type)?.value ?? '';
  return `${get('year')}-${get('month')}-${get('day')} ${get('hour')}:${get('minute')}`;
}

/** Human age of a duration: `3 h`, `2 d 4 h`. */
export function formatAge(ms: number): string {
  const hours = Math.floor(ms / 3_600_000);
  if (hours < 1) return `${Math.max(0, Math.floor(ms / 60_000))} min`;
  if (hours < 24) return `${hours} h`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/**
 * A provider code or a text of codes (`AMOUNT_MISMATCH`, `800 ERROR_ACCOUNT_INCORRECT`) that a narrow
 * column may wrap only after an underscore or at a space, never inside a word (the `.code` rule of the
 * style sheet keeps the words whole).
 */
export function codeText(text: string): SafeHtml {
  return html`<span class="code">${text.split('_').map((part, i) => html`${i ? html`_<wbr>` : ''}${part}`)}</span>`;
}
