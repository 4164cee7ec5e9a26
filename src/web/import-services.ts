/** The Imports page's reads over the ledger database (src/db/imports/read.ts), beside the one import. */
import { getImport, listImports } from '../db/imports/read.ts';
import type { Db } from '../db/schema.ts';
import type { ImportPageServices } from './import-routes.ts';

export function ledgerImportServices(
  db: Db,
  imports: Pick<ImportPageServices, 'run' | 'maxBytes' | 'profiles'>,
): ImportPageServices {
  return {
    run: imports.run,
    maxBytes: imports.maxBytes,
    ...(imports.profiles ? { profiles: imports.profiles } : {}),
    list: (limit) => listImports(db, limit),
    get: (id) => getImport(db, id),
  };
}
