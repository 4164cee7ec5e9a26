/**
 * Test certificates made with the `openssl` command: a CA, a server certificate it signs for
 * 127.0.0.1 and localhost, and a second CA that signed nothing (a client trusting only it must refuse
 * the server). Tests needing them skip with an install hint when openssl is missing, and fail instead
 * when PAYRECON_REQUIRE_TOOLS=1.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const OPENSSL = process.env.OPENSSL ?? '/usr/bin/openssl';
export const hasOpenssl = fs.existsSync(OPENSSL);
export const OPENSSL_HINT = `${OPENSSL} not found (install it with: sudo apt-get install openssl)`;

export interface TestPki {
  dir: string;
  /** Files: the CA certificate, the server certificate and key, another CA's certificate. */
  caFile: string;
  /** A client certificate and key signed by the CA (mutual TLS). */
  clientCertFile: string;
  clientKeyFile: string;
  certFile: string;
  keyFile: string;
  otherCaFile: string;
  ca: string;
  cert: string;
  key: string;
  otherCa: string;
  remove(): void;
}

function openssl(args: string[], cwd: string): void {
  execFileSync(OPENSSL, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Makes the certificates in a fresh temporary directory. */
export function makeTestPki(): TestPki {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'payrecon-pki-'));
  const days = ['-days', '2'];
  for (const ca of ['ca', 'other-ca']) {
    openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        `${ca}.key`,
        '-out',
        `${ca}.pem`,
        '-subj',
        `/CN=payrecon test ${ca}`,
        ...days,
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      dir,
    );
  }
  openssl(
    [
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      '/CN=localhost',
    ],
    dir,
  );
  fs.writeFileSync(
    path.join(dir, 'server.ext'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n',
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'server.pem',
      ...days,
      '-extfile',
      'server.ext',
    ],
    dir,
  );
  openssl(
    [
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'client.key',
      '-out',
      'client.csr',
      '-subj',
      '/CN=payrecon-client',
    ],
    dir,
  );
  fs.writeFileSync(path.join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n');
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'client.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'client.pem',
      ...days,
      '-extfile',
      'client.ext',
    ],
    dir,
  );
  const file = (name: string) => path.join(dir, name);
  const read = (name: string) => fs.readFileSync(file(name), 'utf8');
  return {
    dir,
    caFile: file('ca.pem'),
    certFile: file('server.pem'),
    keyFile: file('server.key'),
    otherCaFile: file('other-ca.pem'),
    clientCertFile: file('client.pem'),
    clientKeyFile: file('client.key'),
    ca: read('ca.pem'),
    cert: read('server.pem'),
    key: read('server.key'),
    otherCa: read('other-ca.pem'),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
