/**
 * The month close (issue 18 point 3) on the `closes` table of migration 20261124T1200_api: the period's
 * instants (`period_start`, `period_end`, read in the report time zone and cut-off), the time zone, and
 * `canonical`, the signed figures as canonical JSON text (sorted keys, amounts as decimal strings) whose
 * SHA-256 is `sha256`. The database itself checks the hash matches the text and that `figures` is that
 * text, so no writer can store figures that do not match their hash. A close is frozen: it cannot be
 * deleted, and the only change allowed is its one approval (prepared -> approved, by someone other than
 * the preparer, CHECK `closes_approver_ck`). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE closes
      ADD COLUMN period_start timestamptz,
      ADD COLUMN period_end timestamptz,
      ADD COLUMN time_zone text,
      ADD COLUMN canonical text;
    ALTER TABLE closes ADD CONSTRAINT closes_signed_ck CHECK (
      canonical IS NOT NULL AND sha256 IS NOT NULL AND period_start IS NOT NULL AND period_end IS NOT NULL
      AND time_zone IS NOT NULL AND period_start < period_end) NOT VALID;
    ALTER TABLE closes ADD CONSTRAINT closes_sha256_ck CHECK (
      sha256 = encode(sha256(convert_to(canonical, 'UTF8')), 'hex') AND figures = canonical::jsonb) NOT VALID;
    ALTER TABLE closes ADD CONSTRAINT closes_approved_ck CHECK (
      (status = 'approved') = (approved_by IS NOT NULL AND approved_at IS NOT NULL));

    CREATE FUNCTION closes_frozen() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'close % of % % is signed and cannot be deleted', OLD.period, OLD.merchant_account, OLD.currency
          USING ERRCODE = 'check_violation';
      END IF;
      IF OLD.status <> 'prepared' OR NEW.status <> 'approved'
         OR (NEW.merchant_account, NEW.currency, NEW.period, NEW.prepared_by, NEW.prepared_at, NEW.figures, NEW.sha256,
             NEW.canonical, NEW.period_start, NEW.period_end, NEW.time_zone)
           IS DISTINCT FROM
            (OLD.merchant_account, OLD.currency, OLD.period, OLD.prepared_by, OLD.prepared_at, OLD.figures, OLD.sha256,
             OLD.canonical, OLD.period_start, OLD.period_end, OLD.time_zone) THEN
        RAISE EXCEPTION 'close % of % % is frozen: only its approval may be recorded', OLD.period, OLD.merchant_account,
          OLD.currency USING ERRCODE = 'check_violation';
      END IF;
      RETURN NEW;
    END
    $fn$;
    CREATE TRIGGER closes_frozen_trg BEFORE UPDATE OR DELETE ON closes
      FOR EACH ROW EXECUTE FUNCTION closes_frozen();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER IF EXISTS closes_frozen_trg ON closes;
    DROP FUNCTION IF EXISTS closes_frozen();
    ALTER TABLE closes DROP CONSTRAINT IF EXISTS closes_approved_ck;
    ALTER TABLE closes DROP CONSTRAINT IF EXISTS closes_sha256_ck;
    ALTER TABLE closes DROP CONSTRAINT IF EXISTS closes_signed_ck;
    ALTER TABLE closes DROP COLUMN IF EXISTS canonical, DROP COLUMN IF EXISTS time_zone,
      DROP COLUMN IF EXISTS period_end, DROP COLUMN IF EXISTS period_start;
  `.execute(db);
}
