/**
 * `payrecon api token create --name NAME --scopes read,exceptions:write`: makes an API token, prints it
 * once, and prints the entry (id, name, scopes, scrypt hash) to add to PAYRECON_API_TOKENS. payrecon
 * keeps only the hash; a lost token is replaced by a new one.
 */
import { API_SCOPES, type ApiScope, createApiToken } from '../domain/api-tokens.ts';
import { AppError } from '../domain/errors.ts';

export interface TokenCreateOptions {
  name: string;
  scopes: string;
}

/** Parses `--scopes`: a comma-separated list of known scopes, at least one. */
export function parseScopes(text: string): ApiScope[] {
  const scopes = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  const unknown = scopes.filter((s) => !(API_SCOPES as readonly string[]).includes(s));
  if (scopes.length === 0 || unknown.length > 0) {
    throw new AppError(
      'VALIDATION_FAILED',
      `--scopes: must be a comma-separated list of ${API_SCOPES.join(', ')}${unknown.length > 0 ? ` (unknown: ${unknown.join(', ')})` : ''}`,
    );
  }
  return [...new Set(scopes as ApiScope[])];
}

export async function runApiTokenCreateCli(
  opts: TokenCreateOptions,
  out: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
): Promise<void> {
  if (!/^[A-Za-z0-9._@-]{1,64}$/.test(opts.name)) {
    throw new AppError('VALIDATION_FAILED', '--name: must be 1-64 characters A-Z a-z 0-9 . _ @ -');
  }
  const { token, entry } = await createApiToken(opts.name, parseScopes(opts.scopes));
  out(`token (shown once; give it to the client): ${token}`);
  out(`entry for PAYRECON_API_TOKENS (a JSON array of such entries): ${JSON.stringify(entry)}`);
}
