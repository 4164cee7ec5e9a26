/**
 * Report-run details and exception acknowledgements for the finance page (issue 7): the parameters
 * of each run, row counts per sheet, the workbook's SHA-256, the files produced, who asked for it and
 * its progress; and who acknowledged an exception, when, with which note (resolution already has its
 * columns). Idempotent (IF NOT EXISTS), so it may run both from the ledger's migration list and from
 * `ensureReportSchema` in `src/reports/schema.ts` until it is listed there. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE report_runs
      ADD COLUMN IF NOT EXISTS parameters jsonb NOT NULL DEFAULT '{}'::jsonb,
      ADD COLUMN IF NOT EXISTS row_counts jsonb NOT NULL DEFAULT '{}'::jsonb,
      ADD COLUMN IF NOT EXISTS sha256 text,
      ADD COLUMN IF NOT EXISTS files jsonb NOT NULL DEFAULT '[]'::jsonb,
      ADD COLUMN IF NOT EXISTS requested_by text,
      ADD COLUMN IF NOT EXISTS trigger text NOT NULL DEFAULT 'demand',
      ADD COLUMN IF NOT EXISTS progress_done bigint NOT NULL DEFAULT 0,
      ADD COLUMN IF NOT EXISTS progress_total bigint NOT NULL DEFAULT 0,
      ADD COLUMN IF NOT EXISTS deleted_at timestamptz;
    CREATE INDEX IF NOT EXISTS report_runs_created_ix ON report_runs (created_at DESC);
    ALTER TABLE exceptions
      ADD COLUMN IF NOT EXISTS acknowledged_by text,
      ADD COLUMN IF NOT EXISTS acknowledged_at timestamptz,
      ADD COLUMN IF NOT EXISTS acknowledgement_note text;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX IF EXISTS report_runs_created_ix;
    ALTER TABLE report_runs
      DROP COLUMN IF EXISTS parameters,
      DROP COLUMN IF EXISTS row_counts,
      DROP COLUMN IF EXISTS sha256,
      DROP COLUMN IF EXISTS files,
      DROP COLUMN IF EXISTS requested_by,
      DROP COLUMN IF EXISTS trigger,
      DROP COLUMN IF EXISTS progress_done,
      DROP COLUMN IF EXISTS progress_total,
      DROP COLUMN IF EXISTS deleted_at;
    ALTER TABLE exceptions
      DROP COLUMN IF EXISTS acknowledged_by,
      DROP COLUMN IF EXISTS acknowledged_at,
      DROP COLUMN IF EXISTS acknowledgement_note;
  `.execute(db);
}
