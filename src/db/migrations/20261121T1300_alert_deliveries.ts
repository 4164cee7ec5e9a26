/**
 * Which alert reached which sink. The alert dispatcher consumes `recon.alert.raised.v1` at least once
 * (a crash after delivery and before the offset commit replays the message), so it records each
 * (alert id, sink) delivery here and skips the pairs already present: each alert reaches each sink once.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE alert_deliveries (
      alert_id text NOT NULL,
      sink text NOT NULL,
      delivered_at timestamptz NOT NULL DEFAULT now(),
      digest boolean NOT NULL DEFAULT false,
      CONSTRAINT alert_deliveries_pk PRIMARY KEY (alert_id, sink)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE alert_deliveries`.execute(db);
}
