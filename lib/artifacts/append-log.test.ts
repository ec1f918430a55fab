import { spawn } from 'node:child_process';
import { appendFile, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openAppendLog, readAppendLog } from './append-log';
import { makeTempDir, repoRoot } from './test-helpers';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup } = await makeTempDir()));
afterEach(() => cleanup());

describe('append log', () => {
  it('appends records as JSON lines and reads every shard back in name order', async () => {
    const a = await openAppendLog(dir, 'worker-a');
    const b = await openAppendLog(dir, 'worker-b');
    await b.append([{ id: 'b1', verdict: 'RELEVANT' }]);
    await a.append([{ id: 'a1' }, { id: 'a2', nested: { ok: true } }]);
    await a.append([]);
    await a.append([{ id: 'a3' }]);
    await a.close();
    await b.close();
    await writeFile(join(dir, 'notes.txt'), 'not a shard\n');

    expect(await readFile(join(dir, 'worker-a.jsonl'), 'utf8')).toBe('{"id":"a1"}\n{"id":"a2","nested":{"ok":true}}\n{"id":"a3"}\n');
    expect(await readAppendLog(dir)).toEqual({
      records: [{ id: 'a1' }, { id: 'a2', nested: { ok: true } }, { id: 'a3' }, { id: 'b1', verdict: 'RELEVANT' }],
      shards: ['worker-a.jsonl', 'worker-b.jsonl'],
      tornLines: 0,
      malformedLines: [],
    });
  });

  it('never interleaves concurrent appends', async () => {
    const log = await openAppendLog(dir, 'shard');
    const text = 'x'.repeat(5000);
    await Promise.all(Array.from({ length: 20 }, (_, call) => log.append(Array.from({ length: 50 }, (_, i) => ({ call, i, text })))));
    await log.close();
    const { records, tornLines, malformedLines } = await readAppendLog<{ call: number; i: number }>(dir);
    expect(records).toHaveLength(1000);
    expect(tornLines).toBe(0);
    expect(malformedLines).toEqual([]);
    for (let call = 0; call < 20; call++) {
      expect(records.slice(call * 50, call * 50 + 50).map((r) => [r.call, r.i])).toEqual(Array.from({ length: 50 }, (_, i) => [call, i]));
    }
  });

  it('skips and counts a torn last line, and cuts it off when the shard is reopened', async () => {
    const log = await openAppendLog(dir, 'judge-0');
    await log.append([{ id: 1 }, { id: 2 }]);
    await log.close();
    const fragment = '{"id":3,"verdict":"REL';
    await appendFile(join(dir, 'judge-0.jsonl'), fragment);

    expect(await readAppendLog(dir)).toMatchObject({ records: [{ id: 1 }, { id: 2 }], tornLines: 1, malformedLines: [] });

    const reopened = await openAppendLog(dir, 'judge-0');
    expect(reopened.droppedTornBytes).toBe(fragment.length);
    await reopened.append([{ id: 3, verdict: 'RELEVANT' }]);
    await reopened.close();
    expect(await readAppendLog(dir)).toMatchObject({
      records: [{ id: 1 }, { id: 2 }, { id: 3, verdict: 'RELEVANT' }],
      tornLines: 0,
      malformedLines: [],
    });
  });

  it('reports damage that is not a torn last line without losing the other records', async () => {
    await writeFile(join(dir, 'damaged.jsonl'), '{"id":1}\n{"id":\n[1,2]\n{"id":4}\n');
    expect(await readAppendLog(dir)).toEqual({
      records: [{ id: 1 }, { id: 4 }],
      shards: ['damaged.jsonl'],
      tornLines: 0,
      malformedLines: [
        { shard: 'damaged.jsonl', line: 2, reason: expect.stringMatching(/^malformed JSON/) },
        { shard: 'damaged.jsonl', line: 3, reason: 'not a JSON object' },
      ],
    });
  });

  it('treats a missing directory as an empty log and refuses bad shard names and non-object records', async () => {
    expect(await readAppendLog(join(dir, 'never-made'))).toEqual({ records: [], shards: [], tornLines: 0, malformedLines: [] });
    await expect(openAppendLog(dir, '../escape')).rejects.toThrow(/shard name "..\/escape"/);
    await expect(openAppendLog(dir, '')).rejects.toThrow(/shard name/);
    const log = await openAppendLog(dir, 'ok');
    await expect(log.append([[1, 2] as unknown as object])).rejects.toThrow(/record 0 must be a plain object, got an array/);
    await log.close();
    await expect(log.append([{ id: 1 }])).rejects.toThrow(/is closed/);
    expect((await stat(join(dir, 'ok.jsonl'))).size).toBe(0);
  });

  it('keeps every acknowledged record when the writing process is SIGKILLed mid-stream', async () => {
    const script = [
      `import { openAppendLog } from ${JSON.stringify(join(repoRoot, 'lib/artifacts/append-log.ts'))};`,
      `const log = await openAppendLog(${JSON.stringify(dir)}, 'killed');`,
      `const pad = 'p'.repeat(20000);`,
      `for (let n = 0; ; n++) { await log.append([{ n, pad }, { n, second: true }]); process.stdout.write(n + '\\n'); }`,
    ].join('\n');
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let acknowledged = -1;
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        const lines = chunk.toString().trim().split('\n');
        acknowledged = Number(lines[lines.length - 1]);
        if (acknowledged >= 40) {
          child.kill('SIGKILL');
          resolve();
        }
      });
      child.on('exit', () => (acknowledged >= 40 ? resolve() : reject(new Error(`writer exited early: ${stderr}`))));
    });
    await new Promise((resolve) => child.on('close', resolve));

    const { records, tornLines, malformedLines } = await readAppendLog<{ n: number; second?: boolean }>(dir);
    expect(malformedLines).toEqual([]);
    expect(tornLines).toBeLessThanOrEqual(1);
    const batches = records.length / 2;
    expect(Number.isInteger(batches)).toBe(true);
    expect(batches).toBeGreaterThan(acknowledged);
    records.forEach((record, i) => expect(record.n).toBe(Math.floor(i / 2)));
  });
});
