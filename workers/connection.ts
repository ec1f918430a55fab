/**
 * The one way codegrep connects to Temporal: both workers, every CLI command and the schedules call
 * `connectClient` / `connectWorkerConnection` here, with the address, namespace and security options of
 * temporal.config.ts (environment variables CODEGREP_TEMPORAL_*). TLS files are read here, so a missing file
 * fails before any network call and names the file and its variable; a connection that fails is turned into
 * one of the named errors below, saying whether the server could not be reached, its certificate was not
 * trusted, or it refused our credentials.
 */
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { Connection, type ConnectionOptions } from '@temporalio/client';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import { temporalConfig } from '../temporal.config';

/** Where and how to connect; every field defaults to temporal.config.ts. */
export interface TemporalConnectionSettings {
  address: string;
  namespace: string;
  /** undefined: on when any other security option is set. */
  tls?: boolean;
  serverName?: string;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  apiKey?: string;
}

/** The settings of temporal.config.ts (its environment variables), with `overrides` on top. */
export function temporalConnectionSettings(overrides: Partial<TemporalConnectionSettings> = {}): TemporalConnectionSettings {
  const security = temporalConfig.security;
  return {
    address: temporalConfig.address,
    namespace: temporalConfig.namespace,
    tls: security.tls,
    serverName: security.serverName,
    caFile: security.caFile,
    certFile: security.certFile,
    keyFile: security.keyFile,
    apiKey: security.apiKey,
    ...Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined)),
  };
}

/** Base of every connection failure; `address` is the server we tried. */
export class TemporalConnectionError extends Error {
  constructor(
    readonly address: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A CA, certificate or key file named in the settings cannot be read. */
export class TemporalTlsFileError extends TemporalConnectionError {}

/** Nothing answers at the address (refused, unresolvable, timed out). */
export class TemporalUnreachableError extends TemporalConnectionError {}

/** The server's certificate is not signed by the trusted CA, or does not carry the expected name. */
export class TemporalServerCertificateError extends TemporalConnectionError {}

/** The server refused our credentials: no or a wrong client certificate, or an API key it does not accept. */
export class TemporalCredentialsRejectedError extends TemporalConnectionError {}

/** Which environment variable sets each file, for the error messages. */
const FILE_VARIABLES = {
  caFile: 'CODEGREP_TEMPORAL_TLS_CA',
  certFile: 'CODEGREP_TEMPORAL_TLS_CERT',
  keyFile: 'CODEGREP_TEMPORAL_TLS_KEY',
} as const;

function readTlsFile(settings: TemporalConnectionSettings, key: keyof typeof FILE_VARIABLES, what: string): Buffer {
  const file = settings[key]!;
  try {
    return readFileSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (error as Error).message;
    throw new TemporalTlsFileError(
      settings.address,
      `cannot read the ${what} ${file} (${FILE_VARIABLES[key]} / temporal.config.ts security.${key}): ${why}`,
      { cause: error },
    );
  }
}

export interface ResolvedConnectionOptions {
  address: string;
  tls: { serverNameOverride?: string; serverRootCACertificate?: Buffer; clientCertPair?: { crt: Buffer; key: Buffer } } | undefined;
  apiKey: string | undefined;
}

/** Reads the TLS files and decides TLS on or off; throws TemporalTlsFileError / TemporalConnectionError for bad settings. */
export function resolveConnectionOptions(settings: TemporalConnectionSettings): ResolvedConnectionOptions {
  if ((settings.certFile === undefined) !== (settings.keyFile === undefined)) {
    const missing = settings.certFile === undefined ? FILE_VARIABLES.certFile : FILE_VARIABLES.keyFile;
    throw new TemporalTlsFileError(settings.address, `mTLS needs both a client certificate and its key: ${missing} is not set`);
  }
  const wantsTls =
    settings.serverName !== undefined || settings.caFile !== undefined || settings.certFile !== undefined || settings.apiKey !== undefined;
  const tlsOn = settings.tls ?? wantsTls;
  if (!tlsOn && (settings.caFile !== undefined || settings.certFile !== undefined)) {
    throw new TemporalConnectionError(
      settings.address,
      'CODEGREP_TEMPORAL_TLS=0 but a CA or client certificate is set: remove one or the other',
    );
  }
  const tls = tlsOn
    ? {
        ...(settings.serverName !== undefined ? { serverNameOverride: settings.serverName } : {}),
        ...(settings.caFile !== undefined ? { serverRootCACertificate: readTlsFile(settings, 'caFile', 'CA certificate') } : {}),
        ...(settings.certFile !== undefined
          ? {
              clientCertPair: {
                crt: readTlsFile(settings, 'certFile', 'client certificate'),
                key: readTlsFile(settings, 'keyFile', 'client key'),
              },
            }
          : {}),
      }
    : undefined;
  return { address: settings.address, tls, apiKey: settings.apiKey };
}

function describeSecurity(settings: TemporalConnectionSettings, resolved: ResolvedConnectionOptions): string {
  if (!resolved.tls) return settings.apiKey !== undefined ? 'plaintext with an API key' : 'plaintext';
  const parts = ['TLS'];
  if (settings.caFile) parts.push(`CA ${settings.caFile}`);
  if (settings.serverName) parts.push(`server name ${settings.serverName}`);
  if (settings.certFile) parts.push(`client certificate ${settings.certFile}`);
  if (settings.apiKey !== undefined) parts.push('API key');
  return parts.join(', ');
}

function errorText(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    parts.push(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    const details = (e as { details?: unknown }).details;
    if (typeof details === 'string') parts.push(details);
  }
  return parts.join(' | ');
}

// Matched against what grpc-js (the client) and the Rust core (the worker's NativeConnection) say.
const SERVER_CERT_PROBLEM =
  /self[- ]signed certificate|UNABLE_TO_VERIFY_LEAF_SIGNATURE|unable to verify the first certificate|unable to (get|verify) (local )?(issuer )?certificate|UnknownIssuer|unknown ?issuer|certificate verify failed|NotValidForName|not valid for name|Hostname\/IP does not match|ERR_TLS_CERT_ALTNAME_INVALID|invalid peer certificate|certificate has expired|CertExpired/i;
const CREDENTIALS_REFUSED =
  /UNAUTHENTICATED|PERMISSION_DENIED|Unauthenticated|PermissionDenied|certificate required|CertificateRequired|bad certificate|BadCertificate|alert (number )?4[26]|tlsv13 alert certificate required|sslv3 alert bad certificate|unknown ca|UnknownCA|DecryptError|access denied|invalid api key|Request unauthorized/i;
const UNREACHABLE =
  /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|Connection refused|ConnectionRefused|dns error|timed out|Deadline|DEADLINE_EXCEEDED|No connection established|UNAVAILABLE|transport error/i;

/** Turns a failed connect into the named error that says what to fix. */
export function explainConnectionError(
  error: unknown,
  settings: TemporalConnectionSettings,
  resolved: ResolvedConnectionOptions,
): TemporalConnectionError {
  if (error instanceof TemporalConnectionError) return error;
  const text = errorText(error);
  const how = describeSecurity(settings, resolved);
  if (SERVER_CERT_PROBLEM.test(text)) {
    return new TemporalServerCertificateError(
      settings.address,
      `the Temporal server at ${settings.address} presented a certificate we do not trust (${how}): check ${FILE_VARIABLES.caFile} ` +
        `is the CA that signed it and CODEGREP_TEMPORAL_SERVER_NAME is a name it carries. ${text}`,
      { cause: error },
    );
  }
  if (CREDENTIALS_REFUSED.test(text)) {
    const which =
      settings.apiKey !== undefined
        ? 'CODEGREP_TEMPORAL_API_KEY'
        : settings.certFile
          ? `${FILE_VARIABLES.certFile} / ${FILE_VARIABLES.keyFile}`
          : 'a client certificate or API key (none is set)';
    return new TemporalCredentialsRejectedError(
      settings.address,
      `the Temporal server at ${settings.address} refused our credentials (${how}): check ${which}. ${text}`,
      { cause: error },
    );
  }
  if (UNREACHABLE.test(text)) {
    return new TemporalUnreachableError(
      settings.address,
      `no Temporal server answers at ${settings.address} (${how}; CODEGREP_TEMPORAL_ADDRESS). ${resolved.tls ? 'If the server speaks plaintext, unset the TLS options. ' : 'If it needs TLS, set CODEGREP_TEMPORAL_TLS=1 (and the CA / client certificate). '}${text}`,
      { cause: error },
    );
  }
  return new TemporalConnectionError(settings.address, `cannot connect to the Temporal server at ${settings.address} (${how}): ${text}`, {
    cause: error,
  });
}

/**
 * grpc-js reports a failed TLS handshake only as "Failed to connect before the deadline". To say which side
 * refused what, repeat the handshake once with Node's TLS (same CA, name, client certificate, ALPN h2) and
 * return its error text: the server certificate check fails on our side at once; a refused client
 * certificate arrives as the server's alert just after the handshake (TLS 1.3), so wait briefly for it.
 */
export async function tlsHandshakeProblem(resolved: ResolvedConnectionOptions, timeoutMs = 3_000): Promise<string | null> {
  if (!resolved.tls) return null;
  const colon = resolved.address.lastIndexOf(':');
  const host = resolved.address.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(resolved.address.slice(colon + 1));
  const servername = resolved.tls.serverNameOverride ?? (/^[\d.]+$|:/.test(host) ? undefined : host);
  return new Promise((resolve) => {
    let settled = false;
    const finish = (problem: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(problem);
    };
    const socket = tls.connect({
      host,
      port,
      ...(servername ? { servername } : {}),
      ALPNProtocols: ['h2'],
      ...(resolved.tls!.serverRootCACertificate ? { ca: resolved.tls!.serverRootCACertificate } : {}),
      ...(resolved.tls!.clientCertPair ? { cert: resolved.tls!.clientCertPair.crt, key: resolved.tls!.clientCertPair.key } : {}),
      // Node checks the name against the host unless told the override: check it against the override.
      checkServerIdentity: (_name, cert) => tls.checkServerIdentity(servername ?? host, cert),
    });
    const timer = setTimeout(() => finish(null), timeoutMs);
    let handshakeDone = false;
    let answered = false;
    socket.once('error', (error: NodeJS.ErrnoException) => {
      const what = `${error.code ? `${error.code} ` : ''}${error.message}`;
      finish(
        handshakeDone && !answered && !/alert/i.test(what)
          ? `TLS: the server reset the connection right after the handshake (${what}): it refused our client certificate (certificate required / bad certificate)`
          : `TLS handshake: ${what}`,
      );
    });
    socket.once('secureConnect', () => {
      handshakeDone = true;
      // The HTTP/2 client preface makes the server read, and so send its alert if it refuses our certificate.
      socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
      setTimeout(() => finish(null), 1_000);
    });
    socket.on('data', () => (answered = true));
    socket.once('close', () =>
      // A server that verifies client certificates after the handshake (Node, many proxies) just hangs up.
      finish(
        handshakeDone && !answered
          ? 'TLS: the server closed the connection right after the handshake without answering: it refused our client certificate (certificate required / bad certificate)'
          : null,
      ),
    );
  });
}

/** explainConnectionError, first asking the TLS handshake what went wrong when the SDK's error does not say. */
async function explainWithTlsProbe(
  error: unknown,
  settings: TemporalConnectionSettings,
  resolved: ResolvedConnectionOptions,
): Promise<TemporalConnectionError> {
  const text = errorText(error);
  if (
    resolved.tls &&
    !SERVER_CERT_PROBLEM.test(text) &&
    !CREDENTIALS_REFUSED.test(text) &&
    !/ECONNREFUSED|Connection refused|ConnectionRefused/.test(text)
  ) {
    const problem = await tlsHandshakeProblem(resolved).catch(() => null);
    if (problem) return explainConnectionError(new Error(`${problem} (the SDK said: ${text})`, { cause: error }), settings, resolved);
  }
  return explainConnectionError(error, settings, resolved);
}

/**
 * A client connection (CLI commands, schedules, activities that signal workflows). Unlike a bare
 * `Connection.connect`, it also asks the server to describe the namespace, so refused credentials (an API key
 * or certificate the server's authorizer rejects) fail here, as a named error, not at the first real call.
 */
export async function connectClient(
  overrides: Partial<TemporalConnectionSettings> = {},
  extra: Pick<ConnectionOptions, 'connectTimeout'> = {},
): Promise<Connection> {
  const settings = temporalConnectionSettings(overrides);
  const resolved = resolveConnectionOptions(settings);
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({
      address: resolved.address,
      tls: resolved.tls ?? false,
      ...(resolved.apiKey !== undefined ? { apiKey: resolved.apiKey } : {}),
      connectTimeout: extra.connectTimeout ?? 10_000,
    });
    await connection.workflowService.describeNamespace({ namespace: settings.namespace });
    return connection;
  } catch (error) {
    await connection?.close().catch(() => undefined);
    if (/NOT_FOUND|Namespace .* is not found/i.test(errorText(error))) {
      throw new TemporalConnectionError(
        settings.address,
        `the Temporal server at ${settings.address} has no namespace "${settings.namespace}" (CODEGREP_NAMESPACE)`,
        { cause: error },
      );
    }
    throw await explainWithTlsProbe(error, settings, resolved);
  }
}

/** The worker's (Rust core) connection, with the same settings and errors. */
export async function connectWorkerConnection(overrides: Partial<TemporalConnectionSettings> = {}): Promise<NativeConnection> {
  const settings = temporalConnectionSettings(overrides);
  const resolved = resolveConnectionOptions(settings);
  const options: NativeConnectionOptions = {
    address: resolved.address,
    tls: resolved.tls ?? false,
    ...(resolved.apiKey !== undefined ? { apiKey: resolved.apiKey } : {}),
  };
  try {
    return await NativeConnection.connect(options);
  } catch (error) {
    throw await explainWithTlsProbe(error, settings, resolved);
  }
}

/**
 * Whether the configured server answers; the error when not (so callers can tell "start the embedded server"
 * from "fix your credentials").
 */
export async function probeTemporal(
  overrides: Partial<TemporalConnectionSettings> = {},
  timeoutMs = 3_000,
): Promise<TemporalConnectionError | null> {
  try {
    const connection = await connectClient(overrides, { connectTimeout: timeoutMs });
    await connection.close();
    return null;
  } catch (error) {
    if (error instanceof TemporalConnectionError) return error;
    throw error;
  }
}

/** What a command prints when no server answers: the error, and how to get one (one wording for every command). */
export function unreachableAdvice(error: TemporalConnectionError): string {
  return `codegrep: ${error.name}: ${error.message}\n  Start a server with 'codegrep server' or set CODEGREP_TEMPORAL_ADDRESS (and the CODEGREP_TEMPORAL_TLS_* / API key variables for a secured cluster).`;
}

/** True when the settings ask for no TLS and no API key: a server the embedded dev server could be. */
export function isPlaintext(overrides: Partial<TemporalConnectionSettings> = {}): boolean {
  const settings = temporalConnectionSettings(overrides);
  return resolveConnectionOptions(settings).tls === undefined && settings.apiKey === undefined;
}
