/**
 * Pages a person (or a browser test) uses: the hosted checkout of a HOSTED deposit (collects the
 * missing payer data and the payment method, then shows the payment details and a "pay" button that
 * acts as the customer paying) and the 3DS page of a card deposit (pass or fail authentication).
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { formatAmount } from '../domain/money.ts';
import { isPhone } from '../provider/rules.ts';
import type { SandboxEngine } from './engine.ts';
import type { DepositRecord } from './entities.ts';

function esc(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:34rem;margin:2rem auto;padding:0 1rem;color:#222}
label{display:block;margin:.6rem 0 .2rem}input,select{width:100%;padding:.4rem;font-size:1rem}
button{margin-top:1rem;padding:.6rem 1.2rem;font-size:1rem}.muted{color:#666;font-size:.9rem}
.error{color:#a00}dl{display:grid;grid-template-columns:auto 1fr;gap:.2rem 1rem}</style></head>
<body><p class="muted">Payment Service sandbox</p><h1>${esc(title)}</h1>${body}</body></html>`;
}

const FIELD_LABELS: Record<string, string> = {
  payment_method: 'Payment method',
  'payer.document': 'Document number',
  'payer.email': 'E-mail',
  'payer.first_name': 'First name',
  'payer.last_name': 'Last name',
  'payer.phone': 'Phone',
  'payer.address.state': 'State (ISO 3166-2 code)',
  'payer.address.zip_code': 'Postal code',
  'reported_info.bank_beneficiary': 'Name of the bank account holder',
  'reported_info.bank_account_number': 'Bank account number',
  'reported_info.bank_branch': 'Bank branch',
  'reported_info.bank_account_type': 'Bank account type',
};

function setPath(target: Record<string, unknown>, path: string, value: string): void {
  const parts = path.split('.');
  let cur = target;
  for (const p of parts.slice(0, -1)) {
    if (typeof cur[p] !== 'object' || cur[p] === null) cur[p] = {};
    cur = cur[p] as Record<string, unknown>;
  }
  cur[parts[parts.length - 1]!] = value;
}

const PAYER_BASICS = ['payer.document', 'payer.email', 'payer.first_name', 'payer.last_name'];

function valueAt(d: DepositRecord, field: string): unknown {
  const [root, ...rest] = field.split('.');
  let cur: unknown = root === 'payer' ? d.payer : root === 'reported_info' ? d.reportedInfo : undefined;
  for (const part of rest)
    cur = typeof cur === 'object' && cur !== null ? (cur as Record<string, unknown>)[part] : undefined;
  return cur;
}

function summary(d: DepositRecord): string {
  return `<dl><dt>Deposit</dt><dd id="deposit-id">${d.id}</dd><dt>Amount</dt><dd>${esc(formatAmount(d.amount))} ${esc(d.currency)}</dd>
<dt>Status</dt><dd id="status">${esc(d.status)}</dd>${d.description ? `<dt>Product</dt><dd>${esc(d.description)}</dd>` : ''}</dl>`;
}

function html(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

export function registerPages(app: FastifyInstance, engine: SandboxEngine): void {
  const byToken = (token: string) => {
    const id = engine.pageTokens.get(token);
    return id === undefined ? undefined : engine.deposits.get(id);
  };

  /** Fields the checkout still has to collect: the method, then what the chosen method needs (rule 4). */
  const needed = (d: DepositRecord): string[] => {
    const out = new Set<string>();
    const method = d.paymentMethod ? engine.catalogue.method(d.paymentMethod) : undefined;
    if (!method) out.add('payment_method');
    for (const f of method ? method.requires : PAYER_BASICS) {
      const v = valueAt(d, f);
      if (v === undefined || v === null || v === '') out.add(f);
    }
    // Values refused under rule 6 (invalid phone, state or postal code) are asked again.
    for (const f of d.missing) {
      if (f !== 'payment_method' && valueAt(d, f) === undefined) out.add(f);
    }
    return [...out];
  };

  const checkoutPage = (d: DepositRecord, error?: string): string => {
    if (d.status === 'CREATED') {
      const methods = engine.catalogue.paymentMethods.filter(
        (m) =>
          m.countries.includes(d.country) &&
          m.type !== 'CREDIT_CARD' &&
          (d.offeredTypes === null || d.offeredTypes.includes(m.type)),
      );
      const inputs = needed(d)
        .map((field) => {
          if (field === 'payment_method') {
            const options = methods
              .map((m) => `<option value="${esc(m.code)}">${esc(m.name)}</option>`)
              .join('');
            return `<label for="f-payment_method">${FIELD_LABELS[field]}</label><select id="f-payment_method" name="payment_method">${options}</select>`;
          }
          return `<label for="f-${esc(field)}">${esc(FIELD_LABELS[field] ?? field)}</label><input id="f-${esc(field)}" name="${esc(field)}" required>`;
        })
        .join('');
      return page(
        'Complete your payment',
        `${summary(d)}${error ? `<p class="error" role="alert">${esc(error)}</p>` : ''}
<form method="post"><p>Please give the details below.</p>${inputs}<button type="submit" id="continue">Continue</button></form>
${d.backUrl ? `<p><a href="${esc(d.backUrl)}">Cancel</a></p>` : ''}`,
      );
    }
    if (d.status === 'PENDING') {
      const method = d.paymentMethod ? engine.catalogue.method(d.paymentMethod) : undefined;
      return page(
        'Pay your deposit',
        `${summary(d)}<p>Pay with <strong>${esc(method?.name ?? d.paymentMethod)}</strong> using reference
<strong>${esc(String(d.id).slice(-8))}</strong>.</p>
<form method="post" action="/checkout/${esc(d.pageToken)}/pay"><p class="muted">Sandbox: this button stands for the customer paying.</p>
<button type="submit" id="pay">I have paid</button></form>`,
      );
    }
    const done = d.status === 'COMPLETED' || d.status === 'APPROVED' || d.status === 'EARLY_RELEASED';
    return page(
      done ? 'Payment received' : 'Deposit closed',
      `${summary(d)}${done && d.successUrl ? `<p><a href="${esc(d.successUrl)}">Back to the merchant</a></p>` : ''}`,
    );
  };

  app.get<{ Params: { token: string } }>('/checkout/:token', async (req, reply) => {
    const d = byToken(req.params.token);
    if (!d || d.card) return html(reply, 404, page('Not found', '<p>Unknown checkout.</p>'));
    return html(reply, 200, checkoutPage(d));
  });

  app.post<{ Params: { token: string } }>('/checkout/:token', async (req, reply) => {
    const d = byToken(req.params.token);
    if (!d || d.card) return html(reply, 404, page('Not found', '<p>Unknown checkout.</p>'));
    if (d.status !== 'CREATED') return reply.redirect(`/checkout/${d.pageToken}`, 303);
    const form = new URLSearchParams(typeof req.body === 'string' ? req.body : '');
    const values: Record<string, string> = {};
    for (const field of needed(d)) {
      const v = (form.get(field) ?? '').trim();
      if (v === '') return html(reply, 400, checkoutPage(d, `${FIELD_LABELS[field] ?? field} is required`));
      if (field === 'payer.email' && !/^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/.test(v)) {
        return html(reply, 400, checkoutPage(d, 'E-mail is not valid'));
      }
      if (field === 'payer.phone' && !isPhone(v))
        return html(reply, 400, checkoutPage(d, 'Phone is not valid'));
      if (field === 'payment_method') {
        const m = engine.catalogue.method(v);
        if (!m?.countries.includes(d.country))
          return html(reply, 400, checkoutPage(d, 'Choose a payment method'));
      }
      values[field] = v;
    }
    for (const [field, v] of Object.entries(values)) {
      if (field === 'payment_method') {
        d.paymentMethod = v;
        d.paymentType = engine.catalogue.method(v)?.type ?? d.paymentType;
      } else if (field.startsWith('payer.')) {
        d.payer ??= {};
        setPath(d.payer, field.slice('payer.'.length), v);
      } else if (field.startsWith('reported_info.')) {
        d.reportedInfo ??= {};
        setPath(d.reportedInfo, field.slice('reported_info.'.length), v);
      }
    }
    d.cachedBody = undefined;
    engine.touch(d);
    // A method chosen on the page may need more fields: ask for them before the deposit moves on.
    if (needed(d).length > 0) return html(reply, 200, checkoutPage(d));
    d.missing = [];
    if (d.payer?.document) d.payerVerification = 'MATCH';
    engine.moveDeposit(d, 'PENDING', {
      trigger: 'checkout',
      reason: 'customer completed the hosted checkout',
    });
    return reply.redirect(`/checkout/${d.pageToken}`, 303);
  });

  app.post<{ Params: { token: string } }>('/checkout/:token/pay', async (req, reply) => {
    const d = byToken(req.params.token);
    if (!d || d.card) return html(reply, 404, page('Not found', '<p>Unknown checkout.</p>'));
    if (d.status === 'PENDING') {
      const to = d.crypto ? 'APPROVED' : d.earlyRelease ? 'EARLY_RELEASED' : 'COMPLETED';
      engine.moveDeposit(d, to, { trigger: 'checkout', reason: 'customer paid' });
    }
    return reply.redirect(`/checkout/${d.pageToken}`, 303);
  });

  const threeDsPage = (d: DepositRecord) =>
    d.status === 'PENDING_AUTHENTICATION'
      ? page(
          'Card authentication',
          `${summary(d)}<p>Card ${esc(d.card?.maskedCard)} (${esc(d.card?.brand)}) asks you to confirm this payment.</p>
<form method="post"><input type="hidden" name="outcome" value="pass"><button type="submit" id="authenticate">Authenticate</button></form>
<form method="post"><input type="hidden" name="outcome" value="fail"><button type="submit" id="fail">Fail authentication</button></form>`,
        )
      : page(d.status === 'COMPLETED' ? 'Payment authorized' : 'Payment not authorized', summary(d));

  app.get<{ Params: { token: string } }>('/3ds/:token', async (req, reply) => {
    const d = byToken(req.params.token);
    if (!d?.card) return html(reply, 404, page('Not found', '<p>Unknown authentication.</p>'));
    return html(reply, 200, threeDsPage(d));
  });

  app.post<{ Params: { token: string } }>('/3ds/:token', async (req, reply) => {
    const d = byToken(req.params.token);
    if (!d?.card) return html(reply, 404, page('Not found', '<p>Unknown authentication.</p>'));
    const outcome = new URLSearchParams(typeof req.body === 'string' ? req.body : '').get('outcome');
    if (d.status === 'PENDING_AUTHENTICATION') {
      const pass = outcome === 'pass';
      if (d.card) {
        d.card.transactionResult = pass ? 'SUCCESS' : 'REJECTED';
        if (!pass) {
          d.card.reasonCode = 'EXTERNAL_HIGH_RISK';
          d.card.reason = '3DS authentication failed';
        }
      }
      engine.moveDeposit(d, pass ? 'COMPLETED' : 'DECLINED', {
        trigger: 'checkout',
        reason: pass ? '3DS authentication passed' : '3DS authentication failed',
      });
    }
    return reply.redirect(`/3ds/${d.pageToken}`, 303);
  });
}
