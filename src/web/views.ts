/**
 * The finance page's markup: one layout, one embedded style sheet, and a function per page. Pages take
 * plain view models (amounts as bigint minor units, instants as Date) and return `SafeHtml`.
 */

import type { WebRole } from '../domain/roles.ts';
import { CHART_CSS } from './charts.ts';
import { formatDateTime, html, raw, type SafeHtml } from './html.ts';

export const STYLE_CSS = `
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2a44;color:#fff;padding:.6rem 1.5rem;display:flex;gap:1.5rem;align-items:center}
header a{color:#dbe4ff;text-decoration:none;font-weight:600}
header a.on{color:#fff;border-bottom:2px solid #8fb0ff}
header .who{margin-left:auto;font-size:.9rem;color:#c3cde3}
header form{display:inline}
main{padding:1.25rem 1.5rem;max-width:1600px}
h1{font-size:1.35rem;margin:.2rem 0 1rem}
h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
table{border-collapse:collapse;background:#fff;width:100%;margin:.5rem 0 1rem;box-shadow:0 1px 2px #0001}
th,td{padding:.4rem .65rem;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600;font-size:.85rem;text-transform:uppercase;letter-spacing:.02em;color:#46505f}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.when{white-space:nowrap}
tr:hover td{background:#fafbfd}
.neg{color:#b3261e}
form.inline{display:flex;gap:.5rem;flex-wrap:wrap;align-items:end;margin:.5rem 0 1rem}
label{display:flex;flex-direction:column;font-size:.8rem;color:#46505f;gap:.15rem}
input,select,button{font:inherit;padding:.3rem .5rem;border:1px solid #b9c0cc;border-radius:4px;background:#fff}
button{background:#2456c7;color:#fff;border-color:#2456c7;cursor:pointer}
button.secondary{background:#fff;color:#2456c7}
.badge{display:inline-block;padding:0 .45rem;border-radius:9px;font-size:.8rem;background:#e3e6eb}
.badge.open{background:#fde2e1;color:#8c1d18}.badge.acknowledged{background:#fff1c2;color:#6b4e00}
.badge.resolved{background:#d8f3dc;color:#1b5e20}.badge.succeeded{background:#d8f3dc;color:#1b5e20}
.badge.running{background:#dbe4ff;color:#1d3a8a}.badge.failed{background:#fde2e1;color:#8c1d18}
.notice{background:#fff;border-left:4px solid #2456c7;padding:.6rem .9rem;margin:.5rem 0 1rem}
.error{border-left-color:#b3261e}
.login{max-width:340px;margin:4rem auto;background:#fff;padding:1.5rem;box-shadow:0 1px 3px #0002}
.login label{margin-bottom:.7rem}
progress{width:320px;height:1rem}
table.narrow{width:auto}
.muted{color:#6b7483;font-size:.85rem}
.problem{max-width:640px;margin:3rem auto}
header form.search input{width:16rem;border-color:#3b4d72;background:#27375a;color:#fff}
@media (max-width:1200px){header{flex-wrap:wrap;gap:.5rem 1rem}header form.search input{width:12rem}}
.sides{display:grid;grid-template-columns:repeat(3,1fr);gap:1rem}
.sides section{background:#fff;padding:.6rem .9rem;box-shadow:0 1px 2px #0001}
.sides dl{display:grid;grid-template-columns:auto 1fr;gap:.2rem .8rem;margin:0}
.sides dt{color:#46505f;font-size:.85rem}.sides dd{margin:0}
dl.facts{display:grid;grid-template-columns:auto 1fr;gap:.1rem .6rem;margin:0 0 .3rem;min-width:16rem}
.facts dt{color:#46505f;font-size:.85rem}.facts dd{margin:0}
.rule{font-size:.85rem;color:#46505f;min-width:16rem}
main{overflow-x:auto}
.mark{display:inline-block;padding:0 .4rem;border-radius:9px;font-size:.75rem;background:#fde2e1;color:#8c1d18}
.problem h1{font-size:1.6rem}
.code{overflow-wrap:normal;word-break:keep-all}
#refunds tfoot th,#refunds tfoot td{background:#eef1f5;font-weight:600;text-transform:none;letter-spacing:0;font-size:.9rem}
${CHART_CSS}`;

export interface PageContext {
  base: string;
  username: string | null;
  /** Show the payment search box in the header. */
  search?: boolean;
  /** The signed-in user's role (src/domain/roles.ts); actions it may not take are not offered. */
  role?: WebRole;
  csrf: string;
  timeZone: string;
  active?:
    | 'reports'
    | 'exceptions'
    | 'balances'
    | 'balances/charts'
    | 'closes'
    | 'imports'
    | 'reconciliation';
}

export function layout(ctx: PageContext, title: string, body: SafeHtml, head?: SafeHtml): SafeHtml {
  const nav = (key: NonNullable<PageContext['active']>, label: string) =>
    html`<a href="${ctx.base}/${key}" class="${ctx.active === key ? 'on' : ''}">${label}</a>`;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · payrecon</title><link rel="icon" href="${ctx.base}/favicon.ico" type="image/svg+xml"><link rel="stylesheet" href="${ctx.base}/static/style.css">${head}</head>
<body>${
    ctx.username
      ? html`<header><strong>payrecon</strong>${nav('reports', 'Reports')}${nav('exceptions', 'Exceptions')}${nav(
          'balances',
          'Balances',
        )}${nav('balances/charts', 'Charts')}${nav('reconciliation', 'Reconciliation')}${nav('closes', 'Closes')}${nav('imports', 'Imports')}${
          ctx.search
            ? html`<form class="search" method="get" action="${ctx.base}/payments" role="search"><input name="q" type="search" placeholder="Find a payment: any id" aria-label="Find a payment by any id"></form>`
            : ''
        }<span class="who">${ctx.username}${ctx.role ? ` (${ctx.role})` : ''} · times in ${ctx.timeZone}</span>
<form method="post" action="${ctx.base}/logout"><input type="hidden" name="_csrf" value="${ctx.csrf}"><button class="secondary" type="submit">Sign out</button></form></header>`
      : ''
  }
<main>${body}</main></body></html>`;
}

export function loginPage(ctx: PageContext, error: string | null, username = ''): SafeHtml {
  return layout(
    ctx,
    'Sign in',
    html`<form class="login" method="post" action="${ctx.base}/login">
<h1>payrecon sign-in</h1>
${error ? html`<div class="notice error" role="alert">${error}</div>` : ''}
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label>User name<input name="username" autocomplete="username" value="${username}" required autofocus></label>
<label>Password<input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit">Sign in</button></form>`,
  );
}

/** Where an error page leads back to: the page the refused action came from. */
export interface BackLink {
  href: string;
  label: string;
}

/** A 404 or an error in the page's own style, with a way back (default: the reports). */
export function errorPage(
  ctx: PageContext,
  status: number,
  title: string,
  message: string,
  back: BackLink = { href: `${ctx.base}/reports`, label: 'Back to the reports' },
): SafeHtml {
  return layout(
    ctx,
    title,
    html`<section class="problem" data-status="${status}"><h1>${title}</h1>
<div class="notice error" role="alert">${message}</div>
<p><a href="${back.href}">${back.label}</a>${ctx.username ? '' : html` · <a href="${ctx.base}/login">Sign in</a>`}</p></section>`,
  );
}

// ------------------------------------------------------------------------------------------- reports

export type ReportKind = 'settlement' | 'exceptions';
export type ReportStatus = 'running' | 'succeeded' | 'failed';

/** One report run as the page shows it. */
export interface ReportRunView {
  id: string;
  kind: ReportKind;
  account: string | null;
  /** Period, local dates in the configured time zone, both inclusive (`YYYY-MM-DD`). */
  from: string;
  to: string;
  status: ReportStatus;
  progress: { done: number; total: number } | null;
  rowCounts: Record<string, number>;
  sha256: string | null;
  /** Downloadable files: the workbook first, then one CSV per detail sheet. */
  files: { name: string; label: string }[];
  requestedBy: string | null;
  trigger: string;
  createdAt: Date;
  finishedAt: Date | null;
  error: string | null;
}

function runRow(ctx: PageContext, run: ReportRunView): SafeHtml {
  const rows = Object.values(run.rowCounts).reduce((a, b) => a + b, 0);
  return html`<tr><td><a href="${ctx.base}/reports/${run.id}">${run.kind}</a></td><td>${run.account ?? 'all'}</td>
<td class="when">${run.from} – ${run.to}</td><td><span class="badge ${run.status}">${run.status}</span></td>
<td class="num">${run.status === 'succeeded' ? rows.toLocaleString('en-US') : ''}</td>
<td class="when">${formatDateTime(run.createdAt, ctx.timeZone)}</td><td>${run.requestedBy ?? run.trigger}</td>
<td>${run.status === 'succeeded' && run.files[0] ? html`<a href="${ctx.base}/reports/${run.id}/download/${run.files[0].name}">${run.files[0].label}</a>` : ''}</td></tr>`;
}

/** What the report form shows: the defaults, or what was typed when the form is shown again after an error. */
export interface ReportForm {
  kind?: string;
  from: string;
  to: string;
  account?: string | null;
}

export function reportsPage(
  ctx: PageContext,
  runs: readonly ReportRunView[],
  accounts: readonly string[],
  form: ReportForm,
  error: string | null,
): SafeHtml {
  const opt = (value: string, label: string, selected: boolean) =>
    html`<option value="${value}"${selected ? raw(' selected') : ''}>${label}</option>`;
  return layout(
    { ...ctx, active: 'reports' },
    'Reports',
    html`<h1>Reports</h1>
${error ? html`<div class="notice error" role="alert">${error}</div>` : ''}
<h2>Generate a workbook</h2>
<form class="inline" method="post" action="${ctx.base}/reports">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label>Workbook<select name="kind">${opt('settlement', 'Settlement', form.kind !== 'exceptions')}${opt(
      'exceptions',
      'Exceptions',
      form.kind === 'exceptions',
    )}</select></label>
<label>From<input type="date" name="from" value="${form.from}" required></label>
<label>To (inclusive)<input type="date" name="to" value="${form.to}" required></label>
<label>Account<select name="account">${opt('', 'All accounts', !form.account)}${accounts.map((a) =>
      opt(a, a, form.account === a),
    )}</select></label>
<button type="submit">Generate</button></form>
<h2>Recent runs</h2>
<table><thead><tr><th>Workbook</th><th>Account</th><th>Period</th><th>Status</th><th class="num">Rows</th><th>Created</th><th>By</th><th>Download</th></tr></thead>
<tbody>${runs.length ? runs.map((r) => runRow(ctx, r)) : html`<tr><td colspan="8" class="muted">No reports yet.</td></tr>`}</tbody></table>`,
  );
}

export function reportPage(ctx: PageContext, run: ReportRunView): SafeHtml {
  const refresh = run.status === 'running' ? raw('<meta http-equiv="refresh" content="2">') : undefined;
  const pct =
    run.progress && run.progress.total > 0 ? Math.floor((run.progress.done / run.progress.total) * 100) : 0;
  return layout(
    { ...ctx, active: 'reports' },
    `${run.kind} ${run.from} – ${run.to}`,
    html`<h1>${run.kind === 'settlement' ? 'Settlement' : 'Exception'} workbook, ${run.from} – ${run.to}</h1>
<p>Account: <strong>${run.account ?? 'all accounts'}</strong> · Status: <span class="badge ${run.status}" id="status">${run.status}</span>
· Requested ${formatDateTime(run.createdAt, ctx.timeZone)} by ${run.requestedBy ?? run.trigger}</p>
${
  run.status === 'running'
    ? html`<p><progress max="100" value="${pct}"></progress> ${pct}%${
        run.progress
          ? html` (${run.progress.done.toLocaleString('en-US')} of ${run.progress.total.toLocaleString('en-US')} rows)`
          : ''
      } <span class="muted">This page refreshes itself.</span></p>`
    : ''
}
${run.error ? html`<div class="notice error" role="alert">${run.error}</div>` : ''}
${
  run.status === 'succeeded'
    ? html`<h2>Files</h2><ul>${run.files.map(
        (f) => html`<li><a href="${ctx.base}/reports/${run.id}/download/${f.name}">${f.label}</a></li>`,
      )}</ul>
<p class="muted">SHA-256 of the workbook: <code>${run.sha256}</code>${run.finishedAt ? html` · finished ${formatDateTime(run.finishedAt, ctx.timeZone)}` : ''}</p>
<h2>Rows</h2><table class="narrow"><thead><tr><th>Sheet</th><th class="num">Rows</th></tr></thead><tbody>${Object.entries(
        run.rowCounts,
      ).map(
        ([k, v]) => html`<tr><td>${k}</td><td class="num">${v.toLocaleString('en-US')}</td></tr>`,
      )}</tbody></table>`
    : ''
}
<p><a href="${ctx.base}/reports">Back to reports</a></p>`,
    refresh,
  );
}
