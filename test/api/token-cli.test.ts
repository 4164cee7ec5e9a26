/**
 * `payrecon api token create`: the token it prints passes the verifier built from the entry it prints,
 * the entry is what PAYRECON_API_TOKENS accepts, and the entry never holds the token.
 */
import { describe, expect, it } from 'vitest';
import { parseScopes, runApiTokenCreateCli } from '../../src/api/cli.ts';
import { loadConfig } from '../../src/config.ts';
import { TokenVerifier } from '../../src/domain/api-tokens.ts';

describe('payrecon api token create --print-entry', () => {
  it('prints a token once and the hashed entry the configuration accepts', async () => {
    const lines: string[] = [];
    await runApiTokenCreateCli(
      { name: 'erp', scopes: 'read, exceptions:write,read', printEntry: true },
      null,
      (l) => lines.push(l),
    );
    const token = /: (prk_\S+)$/.exec(lines[0] ?? '')?.[1] ?? '';
    const entry = JSON.parse(/: (\{.*\})$/.exec(lines[1] ?? '')?.[1] ?? '{}');
    expect(entry).toMatchObject({ name: 'erp', scopes: ['read', 'exceptions:write'] });
    expect(JSON.stringify(entry)).not.toContain(token.slice(4));
    const config = loadConfig({ PAYRECON_API_TOKENS: JSON.stringify([entry]) });
    const verifier = new TokenVerifier(config.web.apiTokens);
    expect(await verifier.check(`Bearer ${token}`)).toMatchObject({ ok: true, entry: { name: 'erp' } });
    const altered = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    expect(await verifier.check(`Bearer ${altered}`)).toMatchObject({ ok: false });
    expect(await verifier.check(`bearer ${token}`)).toEqual({ ok: false, reason: 'malformed' });
    expect(await verifier.check(undefined)).toEqual({ ok: false, reason: 'missing' });
  });

  it('refuses unknown scopes and bad names in one line naming the option', async () => {
    expect(() => parseScopes('read,admin')).toThrow(
      /^--scopes: must be a comma-separated list of .*unknown: admin/,
    );
    expect(() => parseScopes(' , ')).toThrow(/^--scopes:/);
    await expect(
      runApiTokenCreateCli({ name: 'a b', scopes: 'read' }, null, () => undefined),
    ).rejects.toThrow(/^--name:/);
  });

  it('refuses a configured entry with an unknown scope, naming the variable', () => {
    expect(() =>
      loadConfig({
        PAYRECON_API_TOKENS: JSON.stringify([
          { id: '0123456789ab', name: 'x', scopes: ['admin'], hash: 'scrypt$1$1$1$a$b' },
        ]),
      }),
    ).toThrow(/PAYRECON_API_TOKENS/);
  });
});
