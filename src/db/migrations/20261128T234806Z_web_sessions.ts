/**
 * The page's sessions kept on the server (`web_sessions`) and its failed sign-ins (`web_sign_in_failures`).
 * A session row is named by the SHA-256 of its random token (the token itself lives only in the user's
 * cookie) and carries a fingerprint (SHA-256) of the user's configured password hash, so that sign-out,
 * a removed user and a changed password end it on every instance and across restarts. A failed sign-in
 * is counted under an HMAC of the typed user name and of the client address, never the text typed.
 *
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE web_sessions (
      id text NOT NULL,
      username text NOT NULL,
      password_fingerprint text NOT NULL,
      role text NOT NULL,
      created_at timestamptz NOT NULL,
      last_seen_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      ended_at timestamptz,
      ended_reason text,
      CONSTRAINT web_sessions_pk PRIMARY KEY (id),
      CONSTRAINT web_sessions_id_ck CHECK (id ~ '^[0-9a-f]{64}$'),
      CONSTRAINT web_sessions_fingerprint_ck CHECK (password_fingerprint ~ '^[0-9a-f]{64}$'),
      CONSTRAINT web_sessions_ended_ck CHECK ((ended_at IS NULL) = (ended_reason IS NULL))
    );
    CREATE INDEX web_sessions_username_ix ON web_sessions (username) WHERE ended_at IS NULL;
    CREATE INDEX web_sessions_expires_ix ON web_sessions (expires_at);

    CREATE TABLE web_sign_in_failures (
      id bigserial NOT NULL,
      subject text NOT NULL,
      failed_at timestamptz NOT NULL,
      CONSTRAINT web_sign_in_failures_pk PRIMARY KEY (id),
      CONSTRAINT web_sign_in_failures_subject_ck CHECK (subject ~ '^(user|address):[0-9a-f]{64}$')
    );
    CREATE INDEX web_sign_in_failures_subject_ix ON web_sign_in_failures (subject, failed_at);
    CREATE INDEX web_sign_in_failures_failed_ix ON web_sign_in_failures (failed_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE web_sign_in_failures; DROP TABLE web_sessions`.execute(db);
}
