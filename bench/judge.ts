/**
 * Throughput of the CATM stage-2 judge run (lib/labels/judge-run) against its ideal.
 *
 *   npx tsx bench/judge.ts [--n 400] [--latency-ms 200] [--concurrency 16]
 *
 * Candidates are the real ones: CATM stage 1 over the OpenHands sample (116 files), joined with their
 * SWE-bench Verified problem statements, repeated with distinct trajectory ids until there are N (mining runs
 * before the clock starts). The judge is the scripted OpenAI-compatible HTTP server on 127.0.0.1 answering
 * every call after a fixed latency, so the ideal wall time is ceil(N / concurrency) × latency.
 *
 * The server runs in a child process, as a real judge endpoint would, so that it does not share the measured
 * process's event loop.
 *
 * Printed (one JSON line): wallMs of judgeCandidates end to end (prompt building, SDK, HTTP, verdict
 * parsing, the onJudgement hook), idealMs, ratio = wallMs / idealMs (target ≤ 1.10), the peak number of
 * calls the server saw in flight, and a reference run in the same process: a bare 16-lane pool of `fetch`
 * POSTs with the same prompts to the same server (rawMs, ratioToRaw = wallMs / rawMs), which shows what the
 * machine allows. Best of two rounds each (the first pays JIT and connection warm-up). On a machine shared
 * with other work, wall times stretch with the load (printed as loadAverage next to the core count); the CPU
 * milliseconds per call of this process (cpuMsPerCall, rawCpuMsPerCall) stay comparable.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { readRows } from '../lib/artifacts/read-rows';
import { buildJudgeMessages } from '../lib/labels/judge-prompt';
import { judgeCandidates } from '../lib/labels/judge-run';
import { mineTrajectories } from '../lib/trajectories/mine-trajectories';
import type { JudgeCandidate } from '../schemas/judge';
import { reply, startScriptedOpenAiServer } from '../test/support/scripted-openai-server';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const dataDir = path.resolve(repoRoot, '../shared/data');

function parseArgs(argv: string[]): { n: number; latencyMs: number; concurrency: number } {
  const options = { n: 400, latencyMs: 200, concurrency: 16 };
  const names: Record<string, keyof typeof options> = { '--n': 'n', '--latency-ms': 'latencyMs', '--concurrency': 'concurrency' };
  for (let i = 0; i < argv.length; i += 2) {
    const key = names[argv[i]!];
    const value = argv[i + 1];
    if (!key || value === undefined || !/^\d+$/.test(value) || Number(value) < 1) {
      throw new Error(`usage: bench/judge.ts [--n N] [--latency-ms MS] [--concurrency C] (got ${argv.join(' ')})`);
    }
    options[key] = Number(value);
  }
  return options;
}

async function realCandidates(n: number): Promise<JudgeCandidate[]> {
  const problems = new Map<string, string>();
  for await (const record of readRows(path.join(dataDir, 'swebench_verified.jsonl'))) {
    if ('row' in record) {
      const row = record.row as { instance_id: string; problem_statement: string };
      problems.set(row.instance_id, row.problem_statement);
    }
  }
  const mined: JudgeCandidate[] = [];
  const run = mineTrajectories(readRows(path.join(dataDir, 'openhands_trajectories.sample.jsonl')), { minReasoningTokens: 0 });
  for await (const c of run.candidates) {
    mined.push({ ...c, problemStatement: problems.get(c.instanceId) ?? '' });
  }
  if (mined.length === 0) throw new Error('bench/judge.ts: the OpenHands sample gave no candidates');
  return Array.from({ length: n }, (_, i) => {
    const c = mined[i % mined.length]!;
    return { ...c, trajectoryId: `${c.trajectoryId}#${Math.floor(i / mined.length)}` };
  });
}

/** CPU time (user + system) of this process in ms: unlike wall time, barely moved by other load on the machine. */
function cpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

async function rawFetchPool(baseUrl: string, candidates: JudgeCandidate[], concurrency: number): Promise<number> {
  const bodies = candidates.map((c) => JSON.stringify({ model: 'bench-judge', temperature: 0, messages: buildJudgeMessages(c) }));
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++]!;
        const response = await fetch(`${baseUrl}/chat/completions`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json' },
        });
        await response.json();
      }
    }),
  );
  return performance.now() - started;
}

const SERVE_FLAG = '--serve-latency-ms';

/** Child mode: run the scripted server, print its base URL, answer `peak` / `reset` lines on stdin. */
async function serve(latencyMs: number): Promise<void> {
  const server = await startScriptedOpenAiServer({ script: () => reply.text('RELEVANT'), latencyMs });
  process.stdout.write(`${server.baseUrl}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'peak') process.stdout.write(`${server.peakInFlight}\n`);
    if (line === 'reset') {
      server.resetPeak();
      process.stdout.write('ok\n');
    }
  }
  await server.close();
}

interface ServerProcess {
  baseUrl: string;
  ask(command: 'peak' | 'reset'): Promise<string>;
  child: ChildProcess;
}

async function startServerProcess(latencyMs: number): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), SERVE_FLAG, String(latencyMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const readLine = async () => {
    const next = await lines.next();
    if (next.done) throw new Error('bench/judge.ts: the server process exited');
    return next.value;
  };
  const baseUrl = await readLine();
  return {
    baseUrl,
    child,
    async ask(command) {
      child.stdin!.write(`${command}\n`);
      return readLine();
    },
  };
}

async function main(): Promise<void> {
  const { n, latencyMs, concurrency } = parseArgs(process.argv.slice(2));
  const candidates = await realCandidates(n);
  const server = await startServerProcess(latencyMs);
  try {
    let wallMs = Infinity;
    let cpu = Infinity;
    let peakInFlight = 0;
    for (let round = 0; round < 2; round++) {
      await server.ask('reset');
      let judged = 0;
      const cpuBefore = cpuMs();
      const summary = await judgeCandidates({
        candidates,
        alreadyJudged: new Set(),
        llm: { baseUrl: server.baseUrl, model: 'bench-judge' },
        concurrency,
        onJudgement: () => {
          judged += 1;
        },
      });
      if (judged !== n || summary.counts.relevant !== n) {
        throw new Error(`bench/judge.ts: expected ${n} RELEVANT judgements, got ${judged} (${JSON.stringify(summary.counts)})`);
      }
      wallMs = Math.min(wallMs, summary.wallMs);
      cpu = Math.min(cpu, cpuMs() - cpuBefore);
      peakInFlight = Math.max(peakInFlight, Number(await server.ask('peak')));
    }
    let rawMs = Infinity;
    let rawCpu = Infinity;
    for (let round = 0; round < 2; round++) {
      const cpuBefore = cpuMs();
      rawMs = Math.min(rawMs, await rawFetchPool(server.baseUrl, candidates, concurrency));
      rawCpu = Math.min(rawCpu, cpuMs() - cpuBefore);
    }
    const idealMs = Math.ceil(n / concurrency) * latencyMs;
    const round2 = (x: number) => Math.round(x * 1000) / 1000;
    console.log(
      JSON.stringify({
        bench: 'judge',
        n,
        concurrency,
        latencyMs,
        wallMs: Math.round(wallMs),
        idealMs,
        ratio: round2(wallMs / idealMs),
        peakInFlight,
        rawMs: Math.round(rawMs),
        ratioToRaw: round2(wallMs / rawMs),
        cpuMsPerCall: round2(cpu / n),
        rawCpuMsPerCall: round2(rawCpu / n),
        loadAverage: round2(loadavg()[0]!),
        cpus: cpus().length,
      }),
    );
  } finally {
    server.child.stdin!.end();
    await once(server.child, 'exit');
  }
}

const serveAt = process.argv.indexOf(SERVE_FLAG);
if (serveAt >= 0) await serve(Number(process.argv[serveAt + 1]));
else await main();
