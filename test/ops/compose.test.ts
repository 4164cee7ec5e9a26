/**
 * docker-compose.yml, checked by a real compose implementation (Debian's `docker-compose`): the file is
 * valid (`docker-compose config -q`, no Docker engine needed), every part of src/parts.ts runs as its own
 * service with its command, the database is migrated before a part starts, and every service the parts
 * depend on exists. Without docker-compose the test skips with an install hint (it fails under
 * PAYRECON_REQUIRE_TOOLS=1, as in .ci/run).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PART_NAMES } from '../../src/parts.ts';

const ROOT = join(import.meta.dirname, '../..');
const HINT = 'install it with: sudo apt-get install docker-compose';
const probe = spawnSync('docker-compose', ['version', '--short'], { encoding: 'utf8' });
const present = probe.status === 0;
const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
if (!present && !required) console.warn(`compose test skipped: docker-compose missing (${HINT})`);

function compose(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('docker-compose', ['-f', join(ROOT, 'docker-compose.yml'), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    // Compose interpolates ${VARS} from the environment; the file must stand on its defaults.
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe.runIf(present || required)('docker-compose.yml', () => {
  it('is valid for a real compose implementation, on its defaults', () => {
    if (!present) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but docker-compose is missing (${HINT})`);
    const r = compose('config', '-q');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('runs every part as its own service, after the migration', () => {
    if (!present) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but docker-compose is missing (${HINT})`);
    const r = compose('config');
    expect(r.status).toBe(0);
    // The resolved file, one service block each: `  name:` at two spaces under `services:`.
    const services = new Map<string, string>();
    let current: string | null = null;
    let inServices = false;
    for (const line of r.stdout.split('\n')) {
      if (/^\S/.test(line)) {
        inServices = line.startsWith('services:');
        current = null;
        continue;
      }
      if (!inServices) continue;
      const head = /^ {2}([a-z][\w-]*):\s*$/.exec(line);
      if (head) {
        current = head[1]!;
        services.set(current, '');
      } else if (current) {
        services.set(current, `${services.get(current)}${line}\n`);
      }
    }
    for (const part of PART_NAMES) {
      const block = services.get(part);
      expect(block, `service ${part}`).toBeDefined();
      expect(block, `service ${part} command`).toMatch(new RegExp(`command:\\n\\s+- ${part}\\n`));
      expect(block, `service ${part} waits for the migration`).toMatch(
        /migrate:\n\s+condition: service_completed_successfully/,
      );
    }
    for (const needed of ['postgres', 'kafka', 'schema-registry', 'migrate', 'web']) {
      expect(services.has(needed), `service ${needed}`).toBe(true);
    }
  });
});
