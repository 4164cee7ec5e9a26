/**
 * The embedded schema registry under attack (the real server over TCP): with users, every request
 * without the right basic-auth credentials answers 401 and nothing of its body is read or stored; a body
 * over the cap answers 413; connections beyond the cap are closed as they arrive, while those inside it
 * are served; a connection that never sends a whole request is closed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  basicAuthAccepts,
  type RunningRegistry,
  startRegistry,
} from '../../src/embedded/registry/registry.ts';
import { waitFor } from '../helpers/wait.ts';

const USERS = { payrecon: 'a-generated-password-0123456789' };
const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;
const GOOD = basic('payrecon', USERS.payrecon);

const dirs: string[] = [];
let registry: RunningRegistry | null = null;
const sockets: Socket[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'payrecon-registry-attack-'));
  dirs.push(dir);
  return dir;
}

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await registry?.close();
  registry = null;
});

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A raw connection; resolves once connected, and tells when the server closed it. */
function open(port: number): Promise<{ socket: Socket; closed: () => boolean; data: () => string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    sockets.push(socket);
    let closed = false;
    let data = '';
    socket.on('data', (c) => {
      data += c;
    });
    socket.on('close', () => {
      closed = true;
    });
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve({ socket, closed: () => closed, data: () => data }));
    socket.once('error', reject);
  });
}

describe('embedded registry with basic auth', () => {
  it('answers 401 without credentials or with wrong ones, and stores nothing they sent', async () => {
    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: tempDir(), users: USERS });
    const post = (authorization?: string) =>
      fetch(`${registry!.url}/subjects/forged-value/versions`, {
        method: 'POST',
        headers: {
          'content-type': 'application/vnd.schemaregistry.v1+json',
          ...(authorization ? { authorization } : {}),
        },
        body: JSON.stringify({ schema: '"string"' }),
      });
    for (const authorization of [
      undefined,
      basic('payrecon', `${USERS.payrecon}x`),
      basic('payrecon', USERS.payrecon.slice(0, -1)),
      basic('payrecon', ''),
      basic('other', USERS.payrecon),
      `Bearer ${USERS.payrecon}`,
      'Basic !!!',
    ]) {
      const res = await post(authorization);
      expect(res.status, String(authorization)).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Basic /);
      expect(((await res.json()) as { error_code: number }).error_code).toBe(40101);
    }
    const subjects = await fetch(`${registry.url}/subjects`, { headers: { authorization: GOOD } });
    expect(subjects.status).toBe(200);
    expect(await subjects.json()).toEqual([]);
    expect((await post(GOOD)).status).toBe(200);
  });

  it('compares whole credentials', () => {
    expect(basicAuthAccepts(USERS, GOOD)).toBe(true);
    expect(basicAuthAccepts(USERS, undefined)).toBe(false);
    expect(basicAuthAccepts(USERS, basic('payrecon', `${USERS.payrecon} `))).toBe(false);
    expect(basicAuthAccepts(USERS, basic('toString', 'x'))).toBe(false);
    expect(basicAuthAccepts(USERS, Buffer.from('payrecon').toString('base64'))).toBe(false);
  });

  it('closes an unauthenticated connection after its 401, without reading its body', async () => {
    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: tempDir(), users: USERS });
    const c = await open(registry.port);
    // Announces 50 MiB and sends a little: the answer comes at once and the connection is closed.
    c.socket.write(
      'POST /subjects/x/versions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nContent-Length: 52428800\r\n\r\n{"schema":',
    );
    await waitFor('the 401 and the close', () => c.closed());
    expect(c.data()).toMatch(/^HTTP\/1\.1 401 /);
  });

  it('refuses a body over the cap with 413, announced or streamed', async () => {
    registry = await startRegistry({
      host: '127.0.0.1',
      port: 0,
      dataDir: tempDir(),
      users: USERS,
      maxBodyBytes: 1024,
    });
    const big = JSON.stringify({ schema: JSON.stringify({ type: 'string', doc: 'x'.repeat(4096) }) });
    const announced = await fetch(`${registry.url}/subjects/big-value/versions`, {
      method: 'POST',
      headers: { authorization: GOOD, 'content-type': 'application/json' },
      body: big,
    });
    expect(announced.status).toBe(413);
    const c = await open(registry.port);
    c.socket.write(
      `POST /subjects/big-value/versions HTTP/1.1\r\nHost: r\r\nAuthorization: ${GOOD}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    for (let i = 0; i < 4; i++) c.socket.write(`400\r\n${'x'.repeat(0x400)}\r\n`);
    await waitFor('the 413', () => c.data().startsWith('HTTP/1.1 413 '));
    const subjects = await fetch(`${registry.url}/subjects`, { headers: { authorization: GOOD } });
    expect(await subjects.json()).toEqual([]);
  });

  it('serves at most maxConnections at once: more are closed as they arrive', async () => {
    registry = await startRegistry({
      host: '127.0.0.1',
      port: 0,
      dataDir: tempDir(),
      users: USERS,
      maxConnections: 4,
    });
    const held = await Promise.all([1, 2, 3, 4].map(() => open(registry!.port)));
    const extra = await open(registry.port);
    await waitFor('the fifth connection closed', () => extra.closed());
    expect(held.every((c) => !c.closed())).toBe(true);
    // The connections inside the cap are served.
    held[0]!.socket.write(`GET /subjects HTTP/1.1\r\nHost: r\r\nAuthorization: ${GOOD}\r\n\r\n`);
    await waitFor('an answer inside the cap', () => held[0]!.data().startsWith('HTTP/1.1 200 '));
    // Once they go, new connections are served again.
    for (const c of held) c.socket.destroy();
    await waitFor('a new connection served', async () => {
      const res = await fetch(`${registry!.url}/subjects`, { headers: { authorization: GOOD } });
      return res.status === 200;
    });
  });

  it('closes a connection that does not send a whole request in time', async () => {
    registry = await startRegistry({
      host: '127.0.0.1',
      port: 0,
      dataDir: tempDir(),
      users: USERS,
      requestTimeoutMs: 500,
    });
    const c = await open(registry.port);
    c.socket.write('GET /subjects HTTP/1.1\r\nHost: r\r\n');
    await waitFor('the slow connection closed', () => c.closed(), 10_000);
  });
});
