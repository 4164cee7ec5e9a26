/**
 * The global setup's choice of server: TEST_DATABASE_URL wins; `embedded` (as when nothing answers on
 * 5432) starts one embedded PostgreSQL that answers until the teardown stops it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { TestProject } from 'vitest/node';
import setup, { answers } from './database.ts';

function fakeProject() {
  const provided: Record<string, unknown> = {};
  const project = {
    provide: (key: string, value: unknown) => {
      provided[key] = value;
    },
  };
  return { project: project as unknown as TestProject, provided };
}

describe('the test database global setup', () => {
  const saved = process.env.TEST_DATABASE_URL;
  afterEach(() => {
    if (saved === undefined) delete process.env.TEST_DATABASE_URL;
    else process.env.TEST_DATABASE_URL = saved;
  });

  it('uses TEST_DATABASE_URL when it is set, without checking it', async () => {
    process.env.TEST_DATABASE_URL = 'postgres://someone@192.0.2.1:6543/postgres';
    const { project, provided } = fakeProject();
    const teardown = await setup(project);
    expect(provided.databaseUrl).toBe('postgres://someone@192.0.2.1:6543/postgres');
    await teardown();
  });

  it('starts one embedded PostgreSQL when asked (or when nothing answers) and stops it at teardown', async () => {
    process.env.TEST_DATABASE_URL = 'embedded';
    const { project, provided } = fakeProject();
    const teardown = await setup(project);
    const url = provided.databaseUrl as string;
    expect(url).toMatch(/^postgres:\/\/postgres:[^@]+@127\.0\.0\.1:\d+\/postgres$/);
    expect(new URL(url).port).not.toBe('5432');
    expect(await answers(url)).toBe(true);
    await teardown();
    expect(await answers(url)).toBe(false);
  }, 120_000);
});
