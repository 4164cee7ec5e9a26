/**
 * Start-up connection to Kafka with causes an operator can act on. A broker whose certificate is not
 * trusted, a plaintext listener behind KAFKA_SSL=true, and refused SASL credentials stop start-up at
 * once with one line naming the variable to fix; kafkajs alone would retry the first two for half a
 * minute and then report a bare "Connection error". Unreachable brokers keep kafkajs' retries (a
 * broker may still be starting). Messages never carry a password or key.
 */
import tls from 'node:tls';
import type { Admin, Kafka } from 'kafkajs';
import { AppError } from '../domain/errors.ts';
import { type KafkaSecuritySettings, tlsOptionsOf } from './kafka.ts';

/** OpenSSL and Node codes meaning "the peer's certificate was not accepted". */
const UNTRUSTED = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** Alerts of a broker refusing the client's certificate (missing, unknown CA, bad). */
const CLIENT_CERT_REFUSED =
  /ALERT_CERTIFICATE_REQUIRED|ALERT_UNKNOWN_CA|ALERT_BAD_CERTIFICATE|ALERT_HANDSHAKE_FAILURE|ALERT_UNSUPPORTED_CERTIFICATE|CLIENT_CERTIFICATE_REFUSED/;

/** Codes of a TLS client talking to a listener that does not speak TLS. */
const NOT_TLS = new Set(['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'EPROTO']);

function hostPort(broker: string): { host: string; port: number } {
  const at = broker.lastIndexOf(':');
  return { host: broker.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(broker.slice(at + 1)) };
}

/** An ApiVersions v0 request (correlation id 1, client id `payrecon-probe`): any answer means "in". */
function apiVersionsRequest(): Buffer {
  const clientId = Buffer.from('payrecon-probe');
  const body = Buffer.alloc(10 + clientId.length);
  body.writeInt16BE(18, 0);
  body.writeInt16BE(0, 2);
  body.writeInt32BE(1, 4);
  body.writeInt16BE(clientId.length, 8);
  clientId.copy(body, 10);
  const size = Buffer.alloc(4);
  size.writeInt32BE(body.length, 0);
  return Buffer.concat([size, body]);
}

/**
 * Opens one TLS connection to `broker` with the configured trust and client certificate, sends an
 * ApiVersions request and answers the failure code, or null when the broker answered or was not
 * reachable at all (kafkajs retries those). The request matters: under TLS 1.3 a broker refuses a
 * missing or unknown client certificate only after the client's handshake has completed.
 */
export function probeTls(
  broker: string,
  options: tls.ConnectionOptions,
  timeoutMs = 10_000,
): Promise<string | null> {
  const { host, port } = hostPort(broker);
  return new Promise((resolve) => {
    const socket = tls.connect({
      host,
      port,
      ...(/^[\d.]+$|:/.test(host) ? {} : { servername: host }),
      ...options,
    });
    const done = (code: string | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(code);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    let secured = false;
    socket.once('secureConnect', () => {
      secured = true;
      socket.write(apiVersionsRequest());
    });
    socket.once('data', () => done(null));
    // Closed after the handshake without answering a request every broker answers: under TLS 1.3 a
    // broker that rejects the client certificate may hang up without an alert.
    socket.once('close', () => done(secured ? 'CLOSED_WITHOUT_ANSWER' : null));
    socket.once('error', (err: NodeJS.ErrnoException) => {
      const code = err.code ?? '';
      if (
        UNTRUSTED.has(code) ||
        NOT_TLS.has(code) ||
        code.startsWith('ERR_SSL') ||
        code.startsWith('ERR_TLS')
      ) {
        done(code);
      } else if (code === 'ECONNRESET') {
        // Reset during the handshake: a plaintext listener closing on bytes it cannot parse.
        done(socket.connecting ? null : code);
      } else if (code === 'EPIPE') {
        done('ERR_SSL_CLIENT_CERTIFICATE_REFUSED');
      } else {
        done(null);
      }
    });
  });
}

/**
 * Connects the admin client, checking TLS first; fails with AppError CONFIG_INVALID whose message is
 * one line `VARIABLE: cause`.
 */
export async function connectAdmin(
  kafka: Kafka,
  brokers: readonly string[],
  security: KafkaSecuritySettings,
): Promise<Admin> {
  const tlsOptions = tlsOptionsOf(security);
  if (tlsOptions && brokers.length > 0) {
    const broker = brokers[0]!;
    const code = await probeTls(broker, tlsOptions);
    if (code !== null && UNTRUSTED.has(code)) {
      const variable = security.caFile ? 'KAFKA_SSL_CA_FILE' : 'KAFKA_SSL_CA_FILE (unset: system CAs)';
      throw new AppError(
        'CONFIG_INVALID',
        `${variable}: the certificate of broker ${broker} is not trusted (${code})`,
        { details: { broker, code } },
      );
    }
    if (code === 'CLOSED_WITHOUT_ANSWER' && !security.certFile) {
      throw new AppError(
        'CONFIG_INVALID',
        `KAFKA_SSL: broker ${broker} closed the connection after the TLS handshake without answering`,
        { details: { broker, code } },
      );
    }
    if (code !== null && (CLIENT_CERT_REFUSED.test(code) || code === 'CLOSED_WITHOUT_ANSWER')) {
      const rule = security.certFile
        ? `broker ${broker} refused the client certificate (${code})`
        : `broker ${broker} requires a client certificate (${code}): set KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE`;
      throw new AppError('CONFIG_INVALID', `KAFKA_SSL_CERT_FILE: ${rule}`, { details: { broker, code } });
    }
    if (code !== null) {
      throw new AppError(
        'CONFIG_INVALID',
        `KAFKA_SSL: broker ${broker} did not complete a TLS handshake (${code}); is its listener plaintext?`,
        { details: { broker, code } },
      );
    }
  }
  const admin = kafka.admin();
  try {
    await admin.connect();
  } catch (err) {
    await admin.disconnect().catch(() => undefined);
    const e = err as Error;
    if (e.name === 'KafkaJSSASLAuthenticationError') {
      const mechanism = security.sasl?.mechanism.toUpperCase() ?? 'SASL';
      throw new AppError(
        'CONFIG_INVALID',
        `KAFKA_SASL_USERNAME/KAFKA_SASL_PASSWORD: the broker refused the credentials (${mechanism}: ${oneLine(e.message)})`,
        { cause: err },
      );
    }
    throw err;
  }
  return admin;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').slice(0, 300);
}
