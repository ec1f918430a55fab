/**
 * The embedded Temporal: the Temporal CLI dev server with a SQLite file, so workflow state survives a
 * restart of the server. Used by `codegrep server`, `codegrep run --embedded` and the test suite.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { temporalConfig } from '../temporal.config';
import { repoRoot } from './paths';

export interface DevServerOptions {
  dataDir: string;
  port?: number;
  uiPort?: number;
  namespace?: string;
  /** Start with the Web UI (default true). Tests turn it off to save a port and memory. */
  ui?: boolean;
  /** Server dynamic config (`--dynamic-config-value key=JSON`); tests lower limits, e.g. when continue-as-new is suggested. */
  dynamicConfig?: Record<string, string | number | boolean>;
  readyTimeoutMs?: number;
}

export interface DevServerHandle {
  address: string;
  uiUrl: string | null;
  pid: number | null;
  /** false when an already-running server at the address was reused. */
  startedHere: boolean;
  logFile: string | null;
  stop(): Promise<void>;
}

/** Resolves the Temporal CLI binary, building the pinned version on first use (scripts/ensure-temporal.sh). */
export function resolveTemporalBinary(): string {
  try {
    return execFileSync('bash', [path.join(repoRoot, 'scripts/ensure-temporal.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim();
  } catch {
    throw new Error('no Temporal CLI available (see the message above from scripts/ensure-temporal.sh)');
  }
}

export function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.once('listening', () => probe.close(() => resolve(true)));
    probe.listen(port, host);
  });
}

/** True when a Temporal frontend answers at the address and serves the namespace. */
export async function temporalAnswers(address: string, namespace: string, timeoutMs = 3_000): Promise<boolean> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: timeoutMs });
    await connection.workflowService.describeNamespace({ namespace });
    return true;
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

function pidFile(dataDir: string): string {
  return path.join(dataDir, 'temporal.pid');
}

export async function startDevServer(options: DevServerOptions): Promise<DevServerHandle> {
  const port = options.port ?? Number(temporalConfig.address.split(':').pop() ?? 7233);
  const uiPort = options.uiPort ?? temporalConfig.uiPort;
  const namespace = options.namespace ?? temporalConfig.namespace;
  const address = `127.0.0.1:${port}`;
  const withUi = options.ui ?? true;
  const dataDir = path.resolve(options.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const uiUrl = withUi ? `http://localhost:${uiPort}` : null;

  if (await temporalAnswers(address, namespace)) {
    return { address, uiUrl, pid: null, startedHere: false, logFile: null, stop: async () => undefined };
  }
  await checkPortsFree(port, withUi ? uiPort : null, namespace);

  const binary = resolveTemporalBinary();
  const args = devServerArgs({ dataDir, namespace, port, uiPort: withUi ? uiPort : null, dynamicConfig: options.dynamicConfig });
  const logFile = path.join(dataDir, 'temporal-server.log');
  const server = spawnDevServer(binary, args, logFile);
  writeFileSync(pidFile(dataDir), String(server.child.pid));
  await waitUntilAnswering(server, address, namespace, logFile, options.readyTimeoutMs ?? 60_000);

  const pid = server.child.pid ?? null;
  return {
    address,
    uiUrl,
    pid,
    startedHere: true,
    logFile,
    stop: async () => {
      await stopDevServer(dataDir);
    },
  };
}

/** Refuses ports something else holds (uiPort null: no Web UI), saying what to change. */
async function checkPortsFree(port: number, uiPort: number | null, namespace: string): Promise<void> {
  if (!(await portIsFree(port))) {
    throw new Error(
      `port ${port} is taken by something that is not a Temporal server serving namespace "${namespace}". ` +
        `Stop it, or choose another port (--port, or CODEGREP_TEMPORAL_ADDRESS=localhost:<port>).`,
    );
  }
  if (uiPort !== null && !(await portIsFree(uiPort))) {
    throw new Error(`the Web UI port ${uiPort} is taken. Stop what uses it, or choose another (--ui-port or CODEGREP_UI_PORT).`);
  }
}

/** `temporal server start-dev`'s arguments: SQLite state in the data dir, codegrep's search attributes (uiPort null: headless). */
function devServerArgs(options: {
  dataDir: string;
  namespace: string;
  port: number;
  uiPort: number | null;
  dynamicConfig: DevServerOptions['dynamicConfig'];
}): string[] {
  return [
    'server',
    'start-dev',
    '--db-filename',
    path.join(options.dataDir, 'temporal.db'),
    '--namespace',
    options.namespace,
    '--port',
    String(options.port),
    '--ip',
    '127.0.0.1',
    '--log-level',
    'warn',
    ...Object.values(temporalConfig.searchAttributes).flatMap((name) => ['--search-attribute', `${name}=Keyword`]),
    ...(options.uiPort !== null ? ['--ui-port', String(options.uiPort)] : ['--headless']),
    ...Object.entries(options.dynamicConfig ?? {}).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${JSON.stringify(value)}`]),
  ];
}

interface SpawnedServer {
  child: ChildProcess;
  /** The exit code once the process has exited (-1 for a signal), null while it runs. */
  exited(): number | null;
}

function spawnDevServer(binary: string, args: string[], logFile: string): SpawnedServer {
  const logFd = openSync(logFile, 'a');
  // Detached: the server outlives `codegrep server` in the background and is stopped by its pid file.
  const child = spawn(binary, args, { detached: true, stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  let exited: number | null = null;
  child.once('exit', (code) => {
    exited = code ?? -1;
  });
  child.unref();
  return { child, exited: () => exited };
}

/** Waits for the server to answer; throws with its last log lines if it exits first, or stops it after timeoutMs. */
async function waitUntilAnswering(server: SpawnedServer, address: string, namespace: string, logFile: string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await temporalAnswers(address, namespace, 2_000))) {
    const exited = server.exited();
    if (exited !== null) {
      const tail = readFileSync(logFile, 'utf8').split('\n').slice(-20).join('\n');
      throw new Error(`the Temporal dev server exited with code ${exited} before answering. Last log lines (${logFile}):\n${tail}`);
    }
    if (Date.now() > deadline) {
      try {
        process.kill(-server.child.pid!, 'SIGTERM');
      } catch {
        /* already gone */
      }
      throw new Error(`the Temporal dev server did not answer at ${address} within ${timeoutMs / 1000}s (log: ${logFile})`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Stops a server started with this data dir (SIGTERM to its process group, then SIGKILL after 10 s). */
export async function stopDevServer(dataDir: string): Promise<boolean> {
  const file = pidFile(path.resolve(dataDir));
  if (!existsSync(file)) return false;
  const pid = Number(readFileSync(file, 'utf8').trim());
  rmSync(file, { force: true });
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  try {
    process.kill(-pid, 'SIGTERM');
  } catch {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return false;
    }
  }
  for (let waited = 0; waited < 10_000 && alive(); waited += 100) await new Promise((r) => setTimeout(r, 100));
  if (alive()) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  return true;
}
