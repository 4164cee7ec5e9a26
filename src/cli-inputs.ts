/**
 * The checks `payrecon` makes of the files and folders named on its command line before a command
 * starts anything: an input file must be there, and a folder written into must exist or be the new
 * child of one that does (no command creates a chain of folders from a typo). Each failure is a usage
 * error naming the option and the path (one line, exit code 2).
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { UsageError } from './cli-errors.ts';

/** `path`, given to `option`, names a file that is there. */
export function requireFile(option: string, path: string | undefined): void {
  if (path === undefined) return;
  if (!existsSync(path)) throw new UsageError(option, `${path}: no such file`);
  if (statSync(path).isDirectory()) throw new UsageError(option, `${path}: is a folder, not a file`);
}

/** `path`, given to `option`, is a folder there, or a new one whose parent folder is there. */
export function requireFolderOrParent(option: string, path: string | undefined): void {
  if (path === undefined) return;
  const folder = resolve(path);
  if (existsSync(folder)) {
    if (!statSync(folder).isDirectory()) throw new UsageError(option, `${path}: is a file, not a folder`);
    return;
  }
  const parent = dirname(folder);
  if (!existsSync(parent)) throw new UsageError(option, `the folder ${parent} does not exist`);
  if (!statSync(parent).isDirectory()) throw new UsageError(option, `${parent}: is a file, not a folder`);
}
