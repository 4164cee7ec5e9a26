/**
 * Mirrors carry their row version (`version`): a value of the sequence `mirror_versions`, drawn anew by
 * every write of the row, so a version is never given twice (not even by a transaction that rolled back).
 * A ledger batch reads its entities without a lock and claims each row it writes by the version it read
 * (`UPDATE mirrors ... WHERE <key> AND version = <read>`); `mirror_claim_check` raises a serialization
 * failure (40001) when fewer rows were claimed than the batch read, so the batch's transaction fails
 * before it writes anything else and is run again from a new read. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE SEQUENCE mirror_versions`.execute(db);
  await sql`ALTER TABLE mirrors ADD COLUMN version bigint NOT NULL DEFAULT nextval('mirror_versions')`.execute(
    db,
  );
  await sql`ALTER SEQUENCE mirror_versions OWNED BY mirrors.version`.execute(db);
  await sql`
    CREATE FUNCTION mirror_claim_check(claimed bigint, expected bigint) RETURNS bigint
    LANGUAGE plpgsql AS $$
    BEGIN
      IF claimed < expected THEN
        RAISE EXCEPTION 'ledger: % mirror rows were written by another transaction after this batch read them',
          expected - claimed
          USING ERRCODE = 'serialization_failure', TABLE = 'mirrors', CONSTRAINT = 'mirrors_version_claim';
      END IF;
      RETURN claimed;
    END $$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION mirror_claim_check(bigint, bigint)`.execute(db);
  await sql`ALTER TABLE mirrors DROP COLUMN version`.execute(db);
}
