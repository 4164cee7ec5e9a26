import { describe, expect, it } from 'vitest';
import { escapeHtml, formatAge, formatDateTime, formatMoney, html, raw } from './html.ts';

describe('html', () => {
  it('escapes interpolations and keeps nested fragments', () => {
    const name = '<img src=x onerror="alert(1)">';
    const page = html`<p title="${name}">${name} ${html`<b>${'&'}</b>`} ${raw('<br>')}</p>`;
    expect(page.value).toBe(
      '<p title="&lt;img src=x onerror=&quot;alert(1)&quot;&gt;">&lt;img src=x onerror=&quot;alert(1)&quot;&gt; <b>&amp;</b> <br></p>',
    );
    expect(html`${null}${undefined}${false}${['a', '<']}`.value).toBe('a&lt;');
    expect(escapeHtml(`'\``)).toBe('&#39;&#96;');
  });

  it.each([
    [0n, '0.00'],
    [5n, '0.05'],
    [-12345n, '-123.45'],
    [123456789n, '1,234,567.89'],
    [100000000000000000000n, '1,000,000,000,000,000,000.00'],
  ])('formats %s minor units as %s', (minor, text) => {
    expect(formatMoney(minor)).toBe(text);
  });

  it('formats dates in a time zone and ages', () => {
    expect(formatDateTime(new Date('2026-11-21T23:30:00Z'), 'Europe/Berlin')).toBe('2026-11-22 00:30');
    expect(formatAge(30 * 60_000)).toBe('30 min');
    expect(formatAge(5 * 3_600_000)).toBe('5 h');
    expect(formatAge(50 * 3_600_000)).toBe('2 d 2 h');
  });
});
