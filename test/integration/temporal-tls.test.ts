import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  connectWorkerConnection,
  TemporalCredentialsRejectedError,
  TemporalServerCertificateError,
  TemporalTlsFileError,
  TemporalUnreachableError,
  type TemporalConnectionSettings,
} from '../../workers/connection';
import { createGpuWorker } from '../../workers/gpu';
import { repoRoot } from '../support/repo-root';
import { makeTestCerts, opensslAvailable, type TestCerts } from '../support/test-certs';
import { startTlsGrpcProxy, type TlsGrpcProxy } from '../support/tls-grpc-proxy';
import { temporalAddress, testClient, uniqueTaskQueue } from '../support/temporal';

/**
 * Secured Temporal connections (workers/connection.ts) against the real dev server behind a real
 * TLS-terminating gRPC proxy (test/support/tls-grpc-proxy.ts), with certificates made by `openssl` here:
 * plain TLS with a private CA and a server name, mTLS (the proxy's TLS handshake demands a client
 * certificate from our CA), and an API key the proxy checks as `authorization: Bearer <key>`. Each failure
 * is a named error. The CLI and the schedules go through the same helper, driven by the environment variables.
 */
if (!opensslAvailable()) throw new Error('these tests need the `openssl` command (Debian package openssl)');

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-tls-it-'));
let certs: TestCerts;
let tlsProxy: TlsGrpcProxy;
let mtlsProxy: TlsGrpcProxy;
let keyProxy: TlsGrpcProxy;
const API_KEY = 'test-api-key-0123456789';

beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  certs = makeTestCerts(work);
  const server = { upstream: temporalAddress(), cert: certs.serverCert, key: certs.serverKey };
  tlsProxy = await startTlsGrpcProxy(server);
  mtlsProxy = await startTlsGrpcProxy({ ...server, clientCa: certs.caCert });
  keyProxy = await startTlsGrpcProxy({ ...server, apiKey: API_KEY });
});

afterAll(async () => {
  await tlsProxy?.close();
  await mtlsProxy?.close();
  await keyProxy?.close();
  rmSync(work, { recursive: true, force: true });
});

const tlsTo = (proxy: TlsGrpcProxy, extra: Partial<TemporalConnectionSettings> = {}): Partial<TemporalConnectionSettings> => ({
  address: proxy.address,
  namespace: 'codegrep',
  caFile: certs.caCert,
  serverName: 'temporal.test',
  ...extra,
});

async function expectRejects<T extends Error>(promise: Promise<unknown>, type: new (...args: never[]) => T, message: RegExp): Promise<T> {
  const error = await promise.then(
    () => {
      throw new Error(`expected ${type.name}, but it connected`);
    },
    (e: unknown) => e,
  );
  expect(error, String(error)).toBeInstanceOf(type);
  expect((error as Error).message).toMatch(message);
  return error as T;
}

/** The real GPU worker connected with `settings`; resolves once the server sees it polling its task queue. */
async function gpuWorkerPolls(settings: Partial<TemporalConnectionSettings>): Promise<void> {
  const taskQueue = uniqueTaskQueue('tls-gpu');
  const { worker, close } = await createGpuWorker({ taskQueue, connection: settings });
  const running = worker.run();
  const { client, close: closeClient } = await testClient();
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const response = await client.workflowService.describeTaskQueue({
        namespace: 'codegrep',
        taskQueue: { name: taskQueue },
        taskQueueType: 2,
      });
      if ((response.pollers ?? []).length > 0) break;
      if (Date.now() > deadline) throw new Error(`the GPU worker never polled ${taskQueue} through ${settings.address}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    worker.shutdown();
    await running;
    await close();
    await closeClient();
  }
}

/** The real `codegrep` command with these environment variables. */
function codegrep(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', path.join(repoRoot, 'cli/main.ts'), ...args],
      { cwd: repoRoot, env: { ...process.env, CODEGREP_NAMESPACE: 'codegrep', ...env }, timeout: 90_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('TLS with a private CA and a server name', () => {
  it('the client and a worker connect through the TLS proxy', async () => {
    const connection = await connectClient(tlsTo(tlsProxy));
    try {
      const client = new Client({ connection, namespace: 'codegrep' });
      const info = await client.workflowService.getSystemInfo({});
      expect(info.serverVersion).toBeTruthy();
    } finally {
      await connection.close();
    }
    await gpuWorkerPolls(tlsTo(tlsProxy));
  });

  it('a CA that did not sign the server certificate is TemporalServerCertificateError, for the client and the worker', async () => {
    await expectRejects(
      connectClient(tlsTo(tlsProxy, { caFile: certs.otherCaCert }), { connectTimeout: 4_000 }),
      TemporalServerCertificateError,
      /do not trust/,
    );
    await expectRejects(
      connectWorkerConnection(tlsTo(tlsProxy, { caFile: certs.otherCaCert })),
      TemporalServerCertificateError,
      /do not trust/,
    );
  });

  it('a server name the certificate does not carry is TemporalServerCertificateError', async () => {
    await expectRejects(
      connectClient(tlsTo(tlsProxy, { serverName: 'elsewhere.test' }), { connectTimeout: 4_000 }),
      TemporalServerCertificateError,
      /CODEGREP_TEMPORAL_SERVER_NAME/,
    );
  });

  it('plaintext against the TLS port, and a port nothing listens on, are TemporalUnreachableError', async () => {
    await expectRejects(
      connectClient({ address: tlsProxy.address, tls: false }, { connectTimeout: 3_000 }),
      TemporalUnreachableError,
      /CODEGREP_TEMPORAL_TLS=1/,
    );
    const closed = await startTlsGrpcProxy({ upstream: temporalAddress(), cert: certs.serverCert, key: certs.serverKey });
    await closed.close();
    await expectRejects(connectClient(tlsTo(closed), { connectTimeout: 3_000 }), TemporalUnreachableError, new RegExp(closed.address));
  });

  it('a CA file that does not exist is TemporalTlsFileError naming the file and its variable, before any network call', async () => {
    const missing = path.join(work, 'no-such-ca.pem');
    await expectRejects(
      connectClient(tlsTo(tlsProxy, { caFile: missing })),
      TemporalTlsFileError,
      new RegExp(`${missing}.*CODEGREP_TEMPORAL_TLS_CA.*no such file`),
    );
    await expectRejects(
      connectClient(tlsTo(tlsProxy, { certFile: certs.clientCert })),
      TemporalTlsFileError,
      /CODEGREP_TEMPORAL_TLS_KEY is not set/,
    );
  });

  it('the CLI (status, schedule list) connects through the same settings from the environment, and names a missing file', async () => {
    const env = {
      CODEGREP_TEMPORAL_ADDRESS: tlsProxy.address,
      CODEGREP_TEMPORAL_TLS_CA: certs.caCert,
      CODEGREP_TEMPORAL_SERVER_NAME: 'temporal.test',
    };
    const status = await codegrep(env, 'status', 'no-such-run');
    expect(status.stderr).toContain('no workflow no-such-run/pipeline in namespace codegrep');
    expect(status.code).toBe(1);
    const schedules = await codegrep(env, 'schedule', 'list');
    expect(schedules.code, schedules.stderr).toBe(0);
    const missing = path.join(work, 'gone.pem');
    const bad = await codegrep({ ...env, CODEGREP_TEMPORAL_TLS_CA: missing }, 'status', 'no-such-run');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`codegrep: TemporalTlsFileError: cannot read the CA certificate ${missing} (CODEGREP_TEMPORAL_TLS_CA`);
    const wrongCa = await codegrep({ ...env, CODEGREP_TEMPORAL_TLS_CA: certs.otherCaCert }, 'schedule', 'list');
    expect(wrongCa.code).toBe(2);
    expect(wrongCa.stderr).toContain('TemporalServerCertificateError');
  });
});

describe('mTLS: the proxy demands a client certificate from our CA', () => {
  it('the client and a worker with the client certificate connect', async () => {
    const settings = tlsTo(mtlsProxy, { certFile: certs.clientCert, keyFile: certs.clientKey });
    const connection = await connectClient(settings);
    await connection.close();
    await gpuWorkerPolls(settings);
  });

  it('no client certificate, or one from another CA, is TemporalCredentialsRejectedError for the client and the worker', async () => {
    await expectRejects(
      connectClient(tlsTo(mtlsProxy), { connectTimeout: 5_000 }),
      TemporalCredentialsRejectedError,
      /refused our credentials/,
    );
    await expectRejects(
      connectClient(tlsTo(mtlsProxy, { certFile: certs.strangerClientCert, keyFile: certs.strangerClientKey }), { connectTimeout: 5_000 }),
      TemporalCredentialsRejectedError,
      /CODEGREP_TEMPORAL_TLS_CERT/,
    );
    await expectRejects(connectWorkerConnection(tlsTo(mtlsProxy)), TemporalCredentialsRejectedError, /refused our credentials/);
    expect(mtlsProxy.tlsErrors.length).toBeGreaterThan(0);
  });
});

describe('API key', () => {
  it('is sent as `authorization: Bearer <key>` by the client and the worker', async () => {
    keyProxy.authorizations.length = 0;
    const settings = tlsTo(keyProxy, { apiKey: API_KEY });
    const connection = await connectClient(settings);
    await connection.close();
    await gpuWorkerPolls(settings);
    expect(keyProxy.authorizations.length).toBeGreaterThan(2);
    expect(new Set(keyProxy.authorizations)).toEqual(new Set([`Bearer ${API_KEY}`]));
  });

  it('a key the server does not accept is TemporalCredentialsRejectedError naming CODEGREP_TEMPORAL_API_KEY', async () => {
    await expectRejects(
      connectClient(tlsTo(keyProxy, { apiKey: 'wrong-key' })),
      TemporalCredentialsRejectedError,
      /CODEGREP_TEMPORAL_API_KEY/,
    );
    await expectRejects(connectClient(tlsTo(keyProxy)), TemporalCredentialsRejectedError, /refused our credentials/);
  });

  it('the CLI sends CODEGREP_TEMPORAL_API_KEY', async () => {
    keyProxy.authorizations.length = 0;
    const env = {
      CODEGREP_TEMPORAL_ADDRESS: keyProxy.address,
      CODEGREP_TEMPORAL_TLS_CA: certs.caCert,
      CODEGREP_TEMPORAL_SERVER_NAME: 'temporal.test',
      CODEGREP_TEMPORAL_API_KEY: API_KEY,
    };
    const status = await codegrep(env, 'status', 'no-such-run');
    expect(status.stderr).toContain('no workflow no-such-run/pipeline');
    expect(keyProxy.authorizations).toContain(`Bearer ${API_KEY}`);
    const refused = await codegrep({ ...env, CODEGREP_TEMPORAL_API_KEY: 'nope' }, 'schedule', 'list');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('TemporalCredentialsRejectedError');
  });
});
