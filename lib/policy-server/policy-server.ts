import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { LineTail, startProcessGroup, type ProcessGroup, type ProcessGroupExit } from '../process';
import { removePidFile, writePidFile } from '../training/trainer-pid-file';
import type { ServedCheckpoint } from './served-checkpoint';

/**
 * One checkpoint behind an OpenAI-compatible Chat Completions server, as a process group of its own
 * (lib/process), so a stop reaches the server and everything it started (vLLM's engine workers).
 *
 * Backends: `vllm` is vLLM's own server, `vllm serve <base> --enable-lora --lora-modules <name>=<adapter>`;
 * `hf` is trainer/serve.py, the trainer's own prompt building and generation on transformers + peft, for
 * nodes without vLLM (a CPU node, the demo, the tests). `auto` takes vLLM where its launcher sits beside
 * the Python and a CUDA device is visible, else `hf`. Either way the server answers under the checkpoint's
 * served name (`<runId>/step-NNNNNNNN`) and is only handed out once a health request names that model.
 */

export type PolicyServerBackend = 'auto' | 'hf' | 'vllm';

export interface StartPolicyServerOptions {
  checkpoint: ServedCheckpoint;
  /** The trainer's Python (training.python). */
  python: string;
  /** Where `python -m trainer.serve` runs (the project root). */
  projectRoot: string;
  backend: PolicyServerBackend;
  /** Files of this server: stdout, stderr, the request log, the pid record. */
  logDir: string;
  /** The address to bind; the URL handed out names it (127.0.0.1 unless the evaluating nodes are elsewhere). */
  host?: string;
  /** A port to bind (a retried server keeps its URL); 0 or absent: any free one. */
  port?: number;
  /** The environment the server starts with (a worker's, read once at start: CUDA devices, caches, HF_HOME). */
  env: NodeJS.ProcessEnv;
  /** How long loading the model may take before the start is given up (default 10 min). */
  readyTimeoutMs?: number;
  /** Stops the server (and a start still waiting) when it aborts. */
  signal?: AbortSignal;
  /** SIGTERM → SIGKILL grace on a stop (default 10 s). */
  graceMs?: number;
}

export interface RunningPolicyServer {
  backend: 'hf' | 'vllm';
  /** `http://host:port/v1`: what an agent retriever's baseUrl is set to. */
  baseUrl: string;
  port: number;
  model: string;
  pid: number;
  /** trainer/serve.py's one JSON line per completion (the hf backend); vLLM's own log is its stdout. */
  requestLog: string;
  stdout: string;
  stderr: string;
  exited: Promise<ProcessGroupExit>;
  /** Stops the whole group and waits until it is reaped. */
  stop(reason: string): Promise<ProcessGroupExit>;
}

/** The server could not be started or never became healthy; the message says why and names its log. */
export class PolicyServerStartError extends Error {
  override readonly name = 'PolicyServerStartError';
}

/** The folder of one checkpoint's server in the run folder: its logs, its request log and its pid record. */
export function policyServerLogDir(runDir: string, step: number): string {
  return path.join(runDir, 'policy-servers', `step-${String(step).padStart(8, '0')}`);
}

export function policyServerFiles(logDir: string) {
  return {
    stdout: path.join(logDir, 'server.stdout.log'),
    stderr: path.join(logDir, 'server.stderr.log'),
    requestLog: path.join(logDir, 'requests.jsonl'),
    pidFile: path.join(logDir, 'server.pid.json'),
  };
}

/** A free TCP port on `host` (asked of the kernel, then released for the server to bind). */
export async function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** vLLM's launcher beside the trainer's Python, when there is one and a CUDA device is visible. */
export function vllmLauncher(python: string, env: NodeJS.ProcessEnv): string | null {
  const launcher = path.join(path.dirname(python), 'vllm');
  if (!existsSync(launcher)) return null;
  const visible = env.CUDA_VISIBLE_DEVICES;
  if (visible !== undefined && visible.trim() === '') return null;
  return existsSync('/dev/nvidia0') || existsSync('/dev/nvidiactl') ? launcher : null;
}

function loraRank(adapterDir: string): number {
  try {
    const config = JSON.parse(readFileSync(path.join(adapterDir, 'adapter_config.json'), 'utf8')) as { r?: unknown };
    return typeof config.r === 'number' ? config.r : 64;
  } catch {
    return 64;
  }
}

function tailOf(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-1500);
  } catch {
    return '';
  }
}

interface Health {
  model?: unknown;
  adapterSha256?: unknown;
}

async function getJson(url: string, timeoutMs: number): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) as unknown };
  } catch {
    return { status: response.status, body: text };
  }
}

/** Whether the server at `root` (no `/v1`) answers health and serves `model` (and, for hf, that adapter). */
export async function servesCheckpoint(root: string, checkpoint: ServedCheckpoint, backend: 'hf' | 'vllm'): Promise<boolean> {
  try {
    const health = await getJson(`${root}/health`, 5_000);
    if (health.status !== 200) return false;
    if (backend === 'hf') {
      const body = health.body as Health;
      return body.model === checkpoint.servedName && body.adapterSha256 === checkpoint.adapterSha256;
    }
    const models = await getJson(`${root}/v1/models`, 5_000);
    const data = (models.body as { data?: { id?: unknown }[] }).data ?? [];
    return models.status === 200 && data.some((m) => m.id === checkpoint.servedName);
  } catch {
    return false;
  }
}

export async function startPolicyServer(options: StartPolicyServerOptions): Promise<RunningPolicyServer> {
  const { env } = options;
  const host = options.host ?? '127.0.0.1';
  const files = policyServerFiles(options.logDir);
  await mkdir(options.logDir, { recursive: true });
  const { checkpoint } = options;
  const launcher = options.backend === 'hf' ? null : vllmLauncher(options.python, env);
  if (options.backend === 'vllm' && launcher === null)
    throw new PolicyServerStartError(
      `policy server backend vllm: no vllm launcher beside ${options.python} or no CUDA device; install trainer/requirements-gpu.txt, or use backend hf`,
    );
  const backend = launcher === null ? 'hf' : 'vllm';
  const port = options.port && options.port > 0 ? options.port : await freePort(host);
  const [program, args] =
    launcher === null ? hfServeCommand(options.python, checkpoint, host, port, files) : vllmServeCommand(launcher, checkpoint, host, port);
  const server = await spawnServer(options, program, args, files);
  const root = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  await waitUntilReady(options, server, root, backend, files);
  return {
    backend,
    baseUrl: `${root}/v1`,
    port,
    model: checkpoint.servedName,
    pid: server.pid,
    requestLog: files.requestLog,
    stdout: files.stdout,
    stderr: files.stderr,
    exited: server.exited,
    stop: server.stop,
  };
}

type PolicyServerFiles = ReturnType<typeof policyServerFiles>;

/** trainer/serve.py on the checkpoint's adapter, logging each completion to the request log. */
function hfServeCommand(
  python: string,
  checkpoint: ServedCheckpoint,
  host: string,
  port: number,
  files: PolicyServerFiles,
): [string, string[]] {
  return [
    python,
    [
      '-m',
      'trainer.serve',
      '--trainer-config',
      checkpoint.trainerConfigPath,
      '--adapter',
      checkpoint.dir,
      '--served-model-name',
      checkpoint.servedName,
      '--host',
      host,
      '--port',
      String(port),
      '--request-log',
      files.requestLog,
    ],
  ];
}

/** vLLM serving the base model with the checkpoint's adapter as a LoRA module under the served name. */
function vllmServeCommand(launcher: string, checkpoint: ServedCheckpoint, host: string, port: number): [string, string[]] {
  return [
    launcher,
    [
      'serve',
      checkpoint.baseModel,
      '--enable-lora',
      '--lora-modules',
      `${checkpoint.servedName}=${checkpoint.dir}`,
      '--max-lora-rank',
      String(loraRank(checkpoint.dir)),
      '--host',
      host,
      '--port',
      String(port),
    ],
  ];
}

/** The server's process group once it has started, with its pid on record until it exits. */
interface SpawnedServer {
  pid: number;
  exited: Promise<ProcessGroupExit>;
  /** How the group ended; null while it runs. */
  exit(): ProcessGroupExit | null;
  stop(reason: string): Promise<ProcessGroupExit>;
}

async function spawnServer(
  options: StartPolicyServerOptions,
  program: string,
  args: string[],
  files: PolicyServerFiles,
): Promise<SpawnedServer> {
  const group: ProcessGroup = startProcessGroup(program, args, {
    cwd: options.projectRoot,
    env: { ...options.env, PYTHONUNBUFFERED: '1' },
    stdout: { file: files.stdout },
    stderr: { file: files.stderr },
    graceMs: options.graceMs ?? 10_000,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  try {
    await group.spawned;
  } catch (error) {
    throw new PolicyServerStartError(`policy server: ${program} could not be started: ${(error as Error).message}`);
  }
  const pid = group.pid!;
  await writePidFile(files.pidFile, pid, { segment: 0, attempt: 0 });
  let exit: ProcessGroupExit | null = null;
  const exited = group.exited.then(async (e) => {
    exit = e;
    await removePidFile(files.pidFile);
    return e;
  });
  const stop = async (reason: string) => {
    group.stop(reason);
    return exited;
  };
  return { pid, exited, exit: () => exit, stop };
}

/**
 * Polls until the server at `root` serves the checkpoint; an exit before that, or no answer by the ready
 * timeout (the server is then stopped), throws with the tail of its stderr.
 */
async function waitUntilReady(
  options: StartPolicyServerOptions,
  server: SpawnedServer,
  root: string,
  backend: 'hf' | 'vllm',
  files: PolicyServerFiles,
): Promise<void> {
  const { checkpoint } = options;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 600_000);
  const tail = new LineTail(files.stdout);
  let listening = backend === 'vllm'; // trainer/serve.py says when it listens; vLLM is polled from the start
  for (;;) {
    const e = server.exit();
    if (e !== null) {
      throw new PolicyServerStartError(
        `policy server for ${checkpoint.servedName} (${backend}) exited before it was ready (code ${e.code}, signal ${e.signal}${e.stoppedFor ? `, stopped: ${e.stoppedFor}` : ''}); ${files.stderr}:\n${tailOf(files.stderr)}`,
      );
    }
    if (Date.now() > deadline) {
      await server.stop('not ready in time');
      throw new PolicyServerStartError(
        `policy server for ${checkpoint.servedName} (${backend}) did not answer a health request within ${options.readyTimeoutMs ?? 600_000} ms; ${files.stderr}:\n${tailOf(files.stderr)}`,
      );
    }
    listening ||= (await tail.read()).some((l) => l.text.includes('"event": "listening"'));
    if (listening && (await servesCheckpoint(root, checkpoint, backend))) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}
