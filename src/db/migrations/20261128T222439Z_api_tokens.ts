/**
 * API bearer tokens kept in the database (`payrecon api token create|list|revoke`), beside those of
 * PAYRECON_API_TOKENS: only the scrypt hash of a token is stored, never the token. A revoked token keeps
 * its row (who had it, when it was revoked); expiry and last use are the API's to check and write.
 *
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE api_tokens (
      id text NOT NULL,
      name text NOT NULL,
      scopes text[] NOT NULL,
      hash text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      created_by text NOT NULL,
      expires_at timestamptz,
      revoked_at timestamptz,
      last_used_at timestamptz,
      CONSTRAINT api_tokens_pk PRIMARY KEY (id),
      CONSTRAINT api_tokens_id_ck CHECK (id ~ '^[0-9a-f]{12}$'),
      CONSTRAINT api_tokens_scopes_ck CHECK (cardinality(scopes) > 0),
      CONSTRAINT api_tokens_hash_ck CHECK (hash LIKE 'scrypt$%')
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE api_tokens`.execute(db);
}
