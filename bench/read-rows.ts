/**
 * Memory and speed of readRows (lib/artifacts) streaming a large JSON Lines file.
 *
 *   npx tsx bench/read-rows.ts [--copies N]
 *
 * Builds a ≈170 MB file in os.tmpdir() by repeating the real OpenHands trajectory sample (8.5 MB, 48 rows)
 * N times (default 20), reads it with readRows, and reports the process's peak RSS right after the read
 * (getrusage maxrss, so no spike is missed between samples). The reference, run afterwards in the same
 * process so it cannot inflate the measured peak, is a bare node:readline + JSON.parse loop over the same
 * file: `ratio` = our seconds / reference seconds (best of two rounds each), the cost of error records and
 * ordinals. Prints one JSON line.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { readFile, rm, stat } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { readRows } from '../lib/artifacts/read-rows';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const samplePath = path.resolve(repoRoot, '../shared/data/openhands_trajectories.sample.jsonl');

function parseCopies(argv: string[]): number {
  if (argv.length === 0) return 20;
  if (argv.length !== 2 || argv[0] !== '--copies' || !/^\d+$/.test(argv[1]!) || Number(argv[1]) < 1) {
    throw new Error(`usage: bench/read-rows.ts [--copies N] (got ${argv.join(' ')})`);
  }
  return Number(argv[1]);
}

async function buildBigFile(copies: number, target: string): Promise<void> {
  let sample = await readFile(samplePath);
  if (sample[sample.length - 1] !== 0x0a) sample = Buffer.concat([sample, Buffer.from('\n')]);
  const out = createWriteStream(target);
  for (let i = 0; i < copies; i++) if (!out.write(sample)) await once(out, 'drain');
  out.end();
  await once(out, 'finish');
}

async function timeReadRows(file: string): Promise<{ rows: number; errors: number; seconds: number }> {
  let rows = 0;
  let errors = 0;
  const started = performance.now();
  for await (const record of readRows(file)) {
    if ('row' in record) rows++;
    else errors++;
  }
  return { rows, errors, seconds: (performance.now() - started) / 1000 };
}

async function timeReference(file: string): Promise<{ rows: number; seconds: number }> {
  let rows = 0;
  const started = performance.now();
  const lines = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    JSON.parse(line);
    rows++;
  }
  return { rows, seconds: (performance.now() - started) / 1000 };
}

const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

async function main(): Promise<void> {
  const copies = parseCopies(process.argv.slice(2));
  const bigPath = path.join(tmpdir(), `codegrep-read-rows-bench-${process.pid}.jsonl`);
  try {
    await buildBigFile(copies, bigPath);
    const { size } = await stat(bigPath);
    const rssBeforeMb = mb(process.memoryUsage().rss);

    const first = await timeReadRows(bigPath);
    const peakRssMb = mb(process.resourceUsage().maxRSS * 1024);
    const reference = await timeReference(bigPath);
    if (reference.rows !== first.rows + first.errors)
      throw new Error(`reference read ${reference.rows} rows, readRows ${first.rows + first.errors}`);
    // A second round of both, best time of each: the first pass pays for JIT warm-up on a shared machine.
    const seconds = Math.min(first.seconds, (await timeReadRows(bigPath)).seconds);
    const referenceSeconds = Math.min(reference.seconds, (await timeReference(bigPath)).seconds);

    console.log(
      JSON.stringify({
        bench: 'read-rows',
        mb: mb(size),
        rows: first.rows,
        errors: first.errors,
        seconds: Math.round(seconds * 1000) / 1000,
        peakRssMb,
        rssBeforeMb,
        referenceSeconds: Math.round(referenceSeconds * 1000) / 1000,
        ratio: Math.round((seconds / referenceSeconds) * 100) / 100,
      }),
    );
  } finally {
    await rm(bigPath, { force: true });
  }
}

await main();
