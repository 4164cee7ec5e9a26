/**
 * The embedded broker's and registry's credentials file: made once, 0600 from its creation, the same
 * for every process that starts at once, closed again when found readable, and refused (naming the file)
 * when it is not payrecon's.
 */
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { embeddedCredentials, embeddedCredentialsFile } from '../../src/embedded-credentials.ts';

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'payrecon-credentials-'));
  dirs.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('embeddedCredentials', () => {
  it('makes random credentials once, mode 0600, and answers the same ones after', async () => {
    const dir = join(tempDir(), 'data');
    const first = await embeddedCredentials(dir);
    expect(statSync(embeddedCredentialsFile(dir)).mode & 0o777).toBe(0o600);
    expect(first.kafka.mechanism).toBe('scram-sha-512');
    expect(first.kafka.password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(first.registry.password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(first.kafka.password).not.toBe(first.registry.password);
    expect(await embeddedCredentials(dir)).toEqual(first);
    expect(await embeddedCredentials(tempDir())).not.toEqual(first);
  });

  it('gives processes starting at once the same credentials, and leaves no temporary file', async () => {
    const dir = tempDir();
    const all = await Promise.all(Array.from({ length: 8 }, () => embeddedCredentials(dir)));
    for (const c of all) expect(c).toEqual(all[0]);
    expect(readdirSync(dir)).toEqual(['embedded-credentials.json']);
  });

  it('closes a file made readable to others again', async () => {
    const dir = tempDir();
    const made = await embeddedCredentials(dir);
    chmodSync(embeddedCredentialsFile(dir), 0o644);
    expect(await embeddedCredentials(dir)).toEqual(made);
    expect(statSync(embeddedCredentialsFile(dir)).mode & 0o777).toBe(0o600);
  });

  it('refuses a file that is not payrecon credentials, naming it', async () => {
    const dir = tempDir();
    const file = embeddedCredentialsFile(dir);
    for (const text of ['not json', '{}', '{"kafka":{"username":"u","password":"short"},"registry":{}}']) {
      writeFileSync(file, text);
      await expect(embeddedCredentials(dir)).rejects.toThrow(`${file}: not payrecon's credentials file`);
    }
  });
});
