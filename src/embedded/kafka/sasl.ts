/**
 * The broker's SASL server side: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as Kafka
 * runs them inside SaslAuthenticate after a SaslHandshake v1. Users come from a JSON object of user
 * name to password (`--sasl-users FILE`); SCRAM credentials (salt, stored key, server key) are derived
 * once per user and mechanism at start-up, with Kafka's minimum of 4096 iterations. Passwords and
 * proofs never leave this module, and failure messages never say whether the user or the password was
 * wrong.
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';

export const SASL_MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'] as const;
export type SaslMechanism = (typeof SASL_MECHANISMS)[number];

export const SCRAM_ITERATIONS = 4096;

/** A refused exchange; the message is what the client is told (Kafka's wording). */
export class SaslFailure extends Error {}

const REFUSED = 'Authentication failed: Invalid username or password';

interface ScramCredential {
  salt: Buffer;
  storedKey: Buffer;
  serverKey: Buffer;
}

type Hash = 'sha256' | 'sha512';
const HASH_OF: Record<Exclude<SaslMechanism, 'PLAIN'>, Hash> = {
  'SCRAM-SHA-256': 'sha256',
  'SCRAM-SHA-512': 'sha512',
};
const KEY_LENGTH: Record<Hash, number> = { sha256: 32, sha512: 64 };

const hmac = (hash: Hash, key: Buffer, text: string) => createHmac(hash, key).update(text).digest();

function scramCredential(hash: Hash, password: string, salt: Buffer): ScramCredential {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, SCRAM_ITERATIONS, KEY_LENGTH[hash], hash);
  const clientKey = hmac(hash, salted, 'Client Key');
  return {
    salt,
    storedKey: createHash(hash).update(clientKey).digest(),
    serverKey: hmac(hash, salted, 'Server Key'),
  };
}

function equalSecret(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** `saslname` decoding: `=2C` is `,` and `=3D` is `=`; any other `=` is malformed. */
function saslName(text: string): string {
  if (/=(?!2C|3D)/.test(text)) throw new SaslFailure('Authentication failed: malformed user name');
  return text.replace(/=2C/g, ',').replace(/=3D/g, '=');
}

function attributes(message: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of message.split(',')) {
    const eq = part.indexOf('=');
    if (eq !== 1) throw new SaslFailure('Authentication failed: malformed SCRAM message');
    out.set(part[0]!, part.slice(2));
  }
  return out;
}

/** One connection's exchange: `step` takes the client's bytes and answers the server's. */
export interface SaslExchange {
  step(clientBytes: Buffer): Buffer;
  /** True once the client is authenticated. */
  readonly done: boolean;
  /** The authenticated user, once done. */
  readonly user: string | null;
}

export class SaslUsers {
  private readonly passwords: Map<string, Buffer>;
  private readonly scram = new Map<Hash, Map<string, ScramCredential>>();

  constructor(users: Readonly<Record<string, string>>) {
    this.passwords = new Map(Object.entries(users).map(([u, p]) => [u, Buffer.from(p, 'utf8')]));
    for (const hash of Object.values(HASH_OF)) {
      const byUser = new Map<string, ScramCredential>();
      for (const [user, password] of Object.entries(users)) {
        byUser.set(user, scramCredential(hash, password, randomBytes(16)));
      }
      this.scram.set(hash, byUser);
    }
  }

  /** Parses a `--sasl-users` file's text: a JSON object of user name to password. */
  static parse(text: string): SaslUsers {
    let users: unknown;
    try {
      users = JSON.parse(text);
    } catch {
      throw new Error('must be a JSON object of user name to password');
    }
    if (typeof users !== 'object' || users === null || Array.isArray(users)) {
      throw new Error('must be a JSON object of user name to password');
    }
    const entries = Object.entries(users);
    if (entries.length === 0) throw new Error('must name at least one user');
    for (const [user, password] of entries) {
      if (user === '' || typeof password !== 'string' || password === '') {
        throw new Error('every user needs a non-empty name and a non-empty password (a string)');
      }
    }
    return new SaslUsers(Object.fromEntries(entries as [string, string][]));
  }

  start(mechanism: SaslMechanism): SaslExchange {
    return mechanism === 'PLAIN' ? this.plain() : this.scramExchange(HASH_OF[mechanism]);
  }

  private plain(): SaslExchange {
    const self = this;
    let user: string | null = null;
    return {
      get done() {
        return user !== null;
      },
      get user() {
        return user;
      },
      step(bytes) {
        if (user !== null) throw new SaslFailure('Authentication failed: exchange already complete');
        // authzid NUL authcid NUL passwd
        const parts = bytes.toString('utf8').split('\u0000');
        if (parts.length !== 3) throw new SaslFailure('Authentication failed: malformed PLAIN message');
        const [authzid, authcid, password] = parts as [string, string, string];
        if (authzid !== '' && authzid !== authcid) {
          throw new SaslFailure('Authentication failed: authorization id must be empty or the user');
        }
        const known = self.passwords.get(authcid);
        const given = Buffer.from(password, 'utf8');
        // Compare even for an unknown user so timing does not tell users apart.
        const ok = equalSecret(known ?? Buffer.alloc(given.length), given) && known !== undefined;
        if (!ok) throw new SaslFailure(REFUSED);
        user = authcid;
        return Buffer.alloc(0);
      },
    };
  }

  private scramExchange(hash: Hash): SaslExchange {
    const credentials = this.scram.get(hash)!;
    let state: 'first' | 'final' | 'done' = 'first';
    let user: string | null = null;
    let credential: ScramCredential | null = null;
    let clientFirstBare = '';
    let serverFirst = '';
    let nonce = '';
    let gs2Header = '';
    return {
      get done() {
        return state === 'done';
      },
      get user() {
        return state === 'done' ? user : null;
      },
      step(bytes) {
        const text = bytes.toString('utf8');
        if (state === 'first') {
          // gs2-header: ("n" | "y") "," [ "a=" authzid ] ","
          const m = /^([ny]),(a=[^,]*)?,(.*)$/s.exec(text);
          if (!m) throw new SaslFailure('Authentication failed: malformed SCRAM client-first message');
          gs2Header = `${m[1]},${m[2] ?? ''},`;
          clientFirstBare = m[3]!;
          const attrs = attributes(clientFirstBare);
          const name = attrs.get('n');
          const clientNonce = attrs.get('r');
          if (name === undefined || !clientNonce) {
            throw new SaslFailure('Authentication failed: SCRAM client-first lacks n= or r=');
          }
          user = saslName(name);
          if (m[2] && saslName(m[2].slice(2)) !== user) {
            throw new SaslFailure('Authentication failed: authorization id must be empty or the user');
          }
          credential = credentials.get(user) ?? null;
          if (!credential) throw new SaslFailure(REFUSED);
          nonce = clientNonce + randomBytes(18).toString('base64');
          serverFirst = `r=${nonce},s=${credential.salt.toString('base64')},i=${SCRAM_ITERATIONS}`;
          state = 'final';
          return Buffer.from(serverFirst, 'utf8');
        }
        if (state === 'final' && credential) {
          const proofAt = text.lastIndexOf(',p=');
          if (proofAt < 0) throw new SaslFailure('Authentication failed: SCRAM client-final lacks p=');
          const withoutProof = text.slice(0, proofAt);
          const attrs = attributes(withoutProof);
          // librdkafka sends its client nonce again before the full nonce; Kafka accepts any r= ending in
          // the nonce it sent (ScramSaslServer), and so does this broker. The proof covers what was sent.
          if (!attrs.get('r')?.endsWith(nonce)) {
            throw new SaslFailure('Authentication failed: SCRAM nonce mismatch');
          }
          if (attrs.get('c') !== Buffer.from(gs2Header, 'utf8').toString('base64')) {
            throw new SaslFailure('Authentication failed: SCRAM channel binding mismatch');
          }
          const proof = Buffer.from(text.slice(proofAt + 3), 'base64');
          const authMessage = `${clientFirstBare},${serverFirst},${withoutProof}`;
          const signature = hmac(hash, credential.storedKey, authMessage);
          if (proof.length !== signature.length) throw new SaslFailure(REFUSED);
          const clientKey = Buffer.alloc(signature.length);
          for (let i = 0; i < signature.length; i++) clientKey[i] = proof[i]! ^ signature[i]!;
          if (!equalSecret(createHash(hash).update(clientKey).digest(), credential.storedKey)) {
            throw new SaslFailure(REFUSED);
          }
          state = 'done';
          const serverSignature = hmac(hash, credential.serverKey, authMessage);
          return Buffer.from(`v=${serverSignature.toString('base64')}`, 'utf8');
        }
        throw new SaslFailure('Authentication failed: exchange already complete');
      },
    };
  }
}
