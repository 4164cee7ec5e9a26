/**
 * The Imports page's markup: the upload form (operators and controllers), the result of an upload, the
 * imports newest first with their counts, matching results and statements, and one import with its
 * statements, the matching run it started and the lines it brought first. Amounts are the decimal text
 * the file gave, never a float.
 */
import type { ImportDetail, ImportStatementView, ImportView } from '../db/imports/read.ts';
import { IMPORT_KINDS, type ImportKind, type ImportOutcome } from '../domain/imports.ts';
import type { MatchSummary } from '../domain/matching.ts';
import { roleCan } from '../domain/roles.ts';
import { formatDateTime, html, raw, type SafeHtml } from './html.ts';
import { layout, type PageContext } from './views.ts';

export const IMPORTS_CSS = `
.imports-form{background:#fff;padding:.8rem 1rem;box-shadow:0 1px 2px #0001;margin:.5rem 0 1rem}
.imports-form input[type=file]{border:1px dashed #8a94a6;padding:.35rem;min-width:18rem}
.imports-form label.check{flex-direction:row;align-items:center;gap:.35rem;font-size:.9rem;color:#1d2430}
.result{background:#fff;border-left:4px solid #1b7f3b;padding:.6rem .9rem;margin:.5rem 0 1rem;box-shadow:0 1px 2px #0001}
.result h2{margin:.1rem 0 .5rem}
.result table{box-shadow:none}
td.stmts{font-size:.85rem;line-height:1.35}
td.stmts div{margin-bottom:.2rem}
td.stmts span{display:block;white-space:nowrap}
td.stmts span+span{color:#46505f;white-space:normal}
td.nowrap{white-space:nowrap}
td.matching{font-size:.85rem}
td.matching span:not(.muted){white-space:nowrap}
#matching h3,.result h3{font-size:.95rem;margin:.3rem 0 .4rem}
td.file{overflow-wrap:anywhere;min-width:11rem}
td.by{overflow-wrap:anywhere;min-width:6rem}
td.stmt{overflow-wrap:anywhere;min-width:10rem}
td.stmt small{display:block;color:#6b7483}
.sha{font-family:ui-monospace,Menlo,monospace;font-size:.8rem;word-break:break-all}
`;

const KIND_LABELS: Record<ImportKind, string> = {
  'bank-statement': 'Bank statement',
  'provider-transactions': 'Provider transactions',
  'provider-settlements': 'Provider settlements',
};

/** The built-in profiles the form offers, by kind. */
export const PROFILE_CHOICES: readonly { name: string; label: string }[] = [
  { name: 'sandbox-bank-csv', label: 'sandbox-bank-csv (bank CSV or XLSX)' },
  { name: 'sandbox-provider-transactions', label: 'sandbox-provider-transactions' },
  { name: 'sandbox-provider-settlements', label: 'sandbox-provider-settlements' },
];

export interface ImportForm {
  kind?: string;
  profile?: string;
  account?: string;
  dryRun?: boolean;
}

const count = (n: number) => n.toLocaleString('en-US');

function importPath(ctx: PageContext, id: string): string {
  return `${ctx.base}/imports/${encodeURIComponent(id)}`;
}

function balances(s: { opening: string | null; closing: string | null }): string {
  return `${s.opening ?? 'no opening'} → ${s.closing ?? 'no closing'}`;
}

function statementCell(statements: readonly ImportStatementView[]): SafeHtml {
  if (statements.length === 0) return html`<span class="muted">–</span>`;
  // The account over its balances: never a break inside an account or an amount.
  return html`${statements.map(
    (s) => html`<div><span>${s.bankAccount} ${s.currency}</span><span>${balances(s)}</span></div>`,
  )}`;
}

const total = (counts: Readonly<Record<string, number>>) => Object.values(counts).reduce((a, b) => a + b, 0);
const NOT_MATCHED_YET = 'Not matched yet: the next matching run takes its lines.';
const NO_NEW_LINES = 'No new lines: this import started no matching run.';

/** The list's cell: the run's counts, short (a line each where the column is narrow), or why there are none. */
function matchingCell(matching: MatchSummary | null, newLines: number): SafeHtml {
  if (matching === null) {
    return newLines === 0
      ? html`<span class="muted">no new lines</span>`
      : html`<span class="muted" title="${NOT_MATCHED_YET}">not matched yet</span>`;
  }
  const u = matching.unmatched;
  return html`<span>${count(total(matching.matched))} matched</span> · <span>${count(u.bankLines + u.settlements + u.reportRows)} unmatched</span> · <span>${count(total(matching.exceptions))} exceptions</span>`;
}

/**
 * What the matching run an import started found: new matches per rule, what is left unmatched (every
 * imported line, not only this file's), exceptions raised or still open by type (each a link to the queue
 * filtered by it), and how many a match resolved.
 */
function matchingSection(ctx: PageContext, matching: MatchSummary | null, newLines: number): SafeHtml {
  if (matching === null) {
    return html`<p class="muted" id="matching-state">${newLines === 0 ? NO_NEW_LINES : NOT_MATCHED_YET}</p>`;
  }
  const byName = (o: Readonly<Record<string, number>>) =>
    Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const rules = byName(matching.matched);
  const exceptions = byName(matching.exceptions);
  const u = matching.unmatched;
  return html`<div class="sides" id="matching">
<section><h3>Matched, by rule</h3>${
    rules.length === 0
      ? html`<p class="muted">No new match.</p>`
      : html`<table class="narrow" id="matched-by-rule"><thead><tr><th>Rule</th><th class="num">Matches</th></tr></thead><tbody>${rules.map(
          ([rule, n]) => html`<tr><td>${rule}</td><td class="num" data-rule="${rule}">${count(n)}</td></tr>`,
        )}</tbody></table>`
  }<p class="muted">Exceptions resolved by a match: <strong data-resolved="${matching.resolved}">${count(matching.resolved)}</strong></p></section>
<section><h3>Left unmatched</h3><table class="narrow" id="unmatched"><tbody>
<tr><th>Bank lines</th><td class="num" data-unmatched="bankLines">${count(u.bankLines)}</td></tr>
<tr><th>Settlements</th><td class="num" data-unmatched="settlements">${count(u.settlements)}</td></tr>
<tr><th>Report rows</th><td class="num" data-unmatched="reportRows">${count(u.reportRows)}</td></tr>
</tbody></table><p class="muted">Every imported line still in no match, this file's and earlier ones.</p></section>
<section><h3>Exceptions raised, by type</h3>${
    exceptions.length === 0
      ? html`<p class="muted">None.</p>`
      : html`<table class="narrow" id="exceptions-by-type"><thead><tr><th>Type</th><th class="num">Open</th></tr></thead><tbody>${exceptions.map(
          ([type, n]) =>
            html`<tr><td><a href="${ctx.base}/exceptions?type=${encodeURIComponent(type)}">${type}</a></td><td class="num" data-type="${type}">${count(n)}</td></tr>`,
        )}</tbody></table><p class="muted">New ones, and those still true from before.</p>`
  }</section>
</div>`;
}

function uploadForm(
  ctx: PageContext,
  form: ImportForm,
  maxBytes: number,
  configured: readonly { name: string; kind: ImportKind }[],
): SafeHtml {
  const opt = (value: string, label: string, selected: boolean) =>
    html`<option value="${value}"${selected ? raw(' selected') : ''}>${label}</option>`;
  return html`<form class="inline imports-form" method="post" action="${ctx.base}/imports" enctype="multipart/form-data">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label>Kind<select name="kind" required>${IMPORT_KINDS.map((k) => opt(k, KIND_LABELS[k], form.kind === k))}</select></label>
<label>File<input type="file" name="file" required accept=".xml,.csv,.xlsx,.txt"></label>
<label>Profile (CSV, XLSX)<select name="profile">${opt('', "The kind's built-in one", !form.profile)}${configured.map(
    (p) => opt(p.name, `${p.name} (${KIND_LABELS[p.kind].toLowerCase()})`, form.profile === p.name),
  )}${PROFILE_CHOICES.map((p) => opt(p.name, p.label, form.profile === p.name))}</select></label>
<label>Bank account (CSV without one)<input name="account" value="${form.account ?? ''}" maxlength="34" placeholder="IBAN or id"></label>
<label class="check"><input type="checkbox" name="dryRun" value="1"${form.dryRun ? raw(' checked') : ''}> Check only</label>
<button type="submit">Import</button>
<span class="muted">camt.053 (001.02 to 001.08), CSV or XLSX; at most ${count(Math.floor(maxBytes / 1024 / 1024))} MiB. Each line is imported once.</span></form>`;
}

function resultPanel(ctx: PageContext, outcome: ImportOutcome): SafeHtml {
  const s = outcome.summary;
  const fresh = (n: number | null) => (n === null ? 'not checked' : count(n));
  const heading = outcome.id === null ? 'Checked (nothing imported)' : 'Imported';
  const body =
    'statements' in s
      ? html`<table class="narrow"><thead><tr><th>Bank account</th><th>Currency</th><th class="num">Opening</th><th class="num">Closing</th><th class="num">Credits</th><th class="num">Debits</th><th class="num">Booked</th><th class="num">Pending</th><th class="num">New lines</th></tr></thead><tbody>${s.statements.map(
          (t) =>
            html`<tr><td>${t.account}</td><td>${t.currency}</td><td class="num">${t.opening ?? '–'}</td><td class="num">${t.closing ?? '–'}</td><td class="num">${t.credits}</td><td class="num">${t.debits}</td><td class="num">${count(t.booked)}</td><td class="num">${count(t.pending)}</td><td class="num" data-new="${t.new ?? ''}">${fresh(t.new)}</td></tr>`,
        )}</tbody></table>`
      : html`<table class="narrow"><thead><tr><th class="num">Rows</th><th class="num">New lines</th></tr></thead><tbody><tr><td class="num">${count(s.rows)}</td><td class="num" data-new="${s.new ?? ''}">${fresh(s.new)}</td></tr></tbody></table>`;
  const newLines = 'statements' in s ? s.statements.reduce((n, t) => n + (t.new ?? 0), 0) : (s.new ?? 0);
  return html`<section class="result" role="status" id="result"><h2>${heading}: ${outcome.fileName} (${KIND_LABELS[outcome.kind]})</h2>
${body}${
  outcome.id === null
    ? ''
    : html`<h3>Matching after this import</h3>${matchingSection(ctx, outcome.matching, newLines)}<p><a href="${importPath(ctx, outcome.id)}">Open import ${outcome.id}</a></p>`
}</section>`;
}

export interface ImportsPageView {
  imports: readonly ImportView[];
  form: ImportForm;
  maxBytes: number;
  /** Configured profiles (PAYRECON_IMPORT_PROFILES_DIR). */
  profiles?: readonly { name: string; kind: ImportKind }[];
  /** The upload just done. */
  outcome?: ImportOutcome | null;
  error?: string | null;
}

export function importsPage(ctx: PageContext, v: ImportsPageView): SafeHtml {
  const canImport = roleCan(ctx.role ?? 'viewer', 'import-files');
  const head = raw(`<link rel="stylesheet" href="${ctx.base}/static/imports.css">`);
  return layout(
    { ...ctx, active: 'imports' },
    'Imports',
    html`<h1>Imports</h1>
${v.error ? html`<div class="notice error" role="alert">${v.error}</div>` : ''}
${v.outcome ? resultPanel(ctx, v.outcome) : ''}
${
  canImport
    ? html`<h2>Import a file</h2>${uploadForm(ctx, v.form, v.maxBytes, v.profiles ?? [])}`
    : html`<p class="muted">Your role (${ctx.role ?? 'viewer'}) reads the imports; operators and controllers import files.</p>`
}
<h2>Imported files</h2>
<table id="imports"><thead><tr><th>Import</th><th>Kind</th><th>File</th><th>By</th><th>When</th><th class="num">Lines</th><th class="num">New lines</th><th>Matching</th><th>Statements (opening → closing)</th></tr></thead>
<tbody>${
      v.imports.length
        ? v.imports.map(
            (i) =>
              html`<tr><td><a href="${importPath(ctx, i.id)}">#${i.id}</a></td><td>${KIND_LABELS[i.kind]}</td><td class="file">${i.fileName}</td><td class="by">${i.importedBy}</td>
<td class="when">${formatDateTime(i.importedAt, ctx.timeZone)}</td><td class="num">${count(i.lines)}</td><td class="num">${count(i.newLines)}</td><td class="matching">${matchingCell(i.matching, i.newLines)}</td><td class="stmts">${statementCell(i.statements)}</td></tr>`,
          )
        : html`<tr><td colspan="9" class="muted">No file imported yet.</td></tr>`
    }</tbody></table>`,
    head,
  );
}

export function importPage(ctx: PageContext, d: ImportDetail): SafeHtml {
  const i = d.import;
  const head = raw(`<link rel="stylesheet" href="${ctx.base}/static/imports.css">`);
  const bank = i.kind === 'bank-statement';
  const withStatus = i.kind === 'provider-transactions';
  return layout(
    { ...ctx, active: 'imports' },
    `Import ${i.id}`,
    html`<h1>Import ${i.id}: ${i.fileName}</h1>
<p>${KIND_LABELS[i.kind]} · imported ${formatDateTime(i.importedAt, ctx.timeZone)} by <strong>${i.importedBy}</strong>${i.profile ? html` · profile ${i.profile}` : ''}</p>
<table class="narrow" id="counts"><tbody>
<tr><th>Lines in the file</th><td class="num">${count(i.lines)}</td></tr>
<tr><th>New lines</th><td class="num">${count(i.newLines)}</td></tr>
${bank ? html`<tr><th>Pending entries (not imported)</th><td class="num">${count(i.skipped)}</td></tr>` : ''}
</tbody></table>
<p class="muted">SHA-256 of the file: <span class="sha">${i.sha256}</span></p>
${
  bank
    ? html`<h2>Statements</h2><table id="statements"><thead><tr><th>#</th><th>Statement</th><th>Bank account</th><th class="num">Opening</th><th class="num">Closing</th><th class="num">Credits</th><th class="num">Debits</th><th class="num">Booked</th><th class="num">Pending</th><th class="num">New lines</th></tr></thead><tbody>${i.statements.map(
        (s) =>
          html`<tr><td>${s.position}</td><td class="stmt">${s.statementId ?? '–'}<small>${s.format}</small></td><td class="nowrap">${s.bankAccount} ${s.currency}</td><td class="num">${s.opening ?? '–'}</td><td class="num">${s.closing ?? '–'}</td><td class="num">${s.credits}</td><td class="num">${s.debits}</td><td class="num">${count(s.booked)}</td><td class="num">${count(s.pending)}</td><td class="num">${count(s.newLines)}</td></tr>`,
      )}</tbody></table>`
    : ''
}
<h2>Matching after this import</h2>
${matchingSection(ctx, i.matching, i.newLines)}
<h2>Lines this import brought first</h2>
${
  d.lines.length === 0
    ? html`<p class="muted">None: every line of this file was imported before (each line is kept once, under the import that first brought it).</p>`
    : html`<table id="lines"><thead><tr><th>Date</th><th>Reference</th><th>Type</th>${withStatus ? html`<th>Status</th>` : ''}<th>Currency</th><th class="num">Amount</th>${bank ? '' : html`<th class="num">Fee</th><th class="num">Net</th><th>Settlement</th>`}<th>Description</th></tr></thead><tbody>${d.lines.map(
        (l) =>
          html`<tr><td class="when">${l.date.replace('T', ' ').replace(/\.\d{3}Z$/, 'Z')}</td><td>${l.reference ?? '–'}</td><td>${l.type}</td>${withStatus ? html`<td>${l.status ?? ''}</td>` : ''}<td>${l.currency}</td><td class="num${l.amount.startsWith('-') ? ' neg' : ''}">${l.amount}</td>${
            bank
              ? ''
              : html`<td class="num">${l.fee ?? ''}</td><td class="num">${l.net ?? ''}${l.netCurrency ? ` ${l.netCurrency}` : ''}</td><td>${l.settlementId ?? ''}</td>`
          }<td>${l.description ?? ''}</td></tr>`,
      )}</tbody></table>${d.more ? html`<p class="muted">The first ${count(d.lines.length)} lines are shown.</p>` : ''}`
}
<p><a href="${ctx.base}/imports">Back to the imports</a></p>`,
    head,
  );
}
