import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { read } from './read';
import { APP_PY, makeSandboxFixture, type SandboxFixture } from '../../test/fixtures/sandbox/fixture';

let fx: SandboxFixture;
beforeAll(async () => {
  fx = await makeSandboxFixture();
  await fs.writeFile(path.join(fx.root, 'two-hundred.txt'), Array.from({ length: 200 }, (_, k) => `r${k + 1}`).join('\n') + '\n');
  await fs.writeFile(
    path.join(fx.root, 'wide.txt'),
    Array.from({ length: 100 }, (_, k) => `${k + 1} ${'w'.repeat(100)}`).join('\n') + '\n',
  );
  await fs.writeFile(
    path.join(fx.root, 'late-nul.txt'),
    Buffer.concat([Buffer.from('ok 1\nok 2\n'), Buffer.alloc(70_000, 0x61), Buffer.from('\n\0tail\n')]),
  );
  await fs.writeFile(path.join(fx.root, 'one-line.js'), 'y'.repeat(30 * 1024 * 1024));
  await fs.writeFile(path.join(fx.root, 'empty.txt'), '');
  await fs.writeFile(path.join(fx.root, 'utf8.txt'), 'naïve café — 日本語 😀\n');
});
afterAll(() => fx.cleanup());

const numbered = (from: number, lines: string[]) => {
  const width = String(from + lines.length - 1).length;
  return lines.map((l, k) => `${String(from + k).padStart(width)}\t${l}`).join('\n');
};

describe('read tool', () => {
  it('shows a whole small file with line numbers', async () => {
    expect(await read(fx.root, { path: 'src/app.py' })).toEqual({ status: 'ok', output: numbered(1, APP_PY.split('\n').slice(0, 8)) });
  });

  it('shows a line range', async () => {
    expect(await read(fx.root, { path: 'lines.txt', start_line: 98, end_line: 101 })).toEqual({
      status: 'ok',
      output: numbered(98, ['line 98', 'line 99', 'line 100', 'line 101']),
    });
    expect((await read(fx.root, { path: 'lines.txt', start_line: 500 })).output).toBe('500\tline 500');
  });

  it('shows exactly 200 lines without a marker (paper: 200 lines per read)', async () => {
    const r = await read(fx.root, { path: 'two-hundred.txt' });
    expect(r.status).toBe('ok');
    expect(r.output.split('\n')).toHaveLength(200);
  });

  it('stops at 200 lines with a marker telling where to continue', async () => {
    const r = await read(fx.root, { path: 'lines.txt', start_line: 101 });
    expect(r.status).toBe('truncated');
    const lines = r.output.split('\n');
    expect(lines).toHaveLength(201);
    expect(lines[199]).toBe('300\tline 300');
    expect(lines[200]).toBe('[showing lines 101-300: at most 200 lines per read; continue with start_line=301]');
    expect(r.message).toBe(lines[200]);
    const asked = await read(fx.root, { path: 'lines.txt', start_line: 1, end_line: 450 });
    expect(asked.output.split('\n').at(-1)).toBe('[showing lines 1-200: at most 200 lines per read; continue with start_line=201]');
  });

  it('stops at the 4096-character limit on whole lines and says where to continue', async () => {
    const r = await read(fx.root, { path: 'wide.txt' });
    expect(r.status).toBe('truncated');
    expect(r.output.length).toBeLessThanOrEqual(4096);
    const lines = r.output.split('\n');
    const last = Number(lines.at(-2)!.split('\t')[0]);
    expect(lines.at(-1)).toBe(`[showing lines 1-${last}: the 4096-character limit; continue with start_line=${last + 1}]`);
    const next = await read(fx.root, { path: 'wide.txt', start_line: last + 1, end_line: last + 1 });
    expect(next.output).toBe(`${last + 1}\t${last + 1} ${'w'.repeat(100)}`);
  });

  it('says when the requested range runs past the end, and refuses a start past the end', async () => {
    expect(await read(fx.root, { path: 'lines.txt', start_line: 499, end_line: 600 })).toEqual({
      status: 'ok',
      output: `${numbered(499, ['line 499', 'line 500'])}\n[end of file: lines.txt has 500 lines]`,
    });
    expect(await read(fx.root, { path: 'lines.txt', start_line: 501 })).toMatchObject({
      status: 'error',
      message: 'read: start_line 501 is past the end of lines.txt (500 lines)',
    });
    expect(await read(fx.root, { path: 'empty.txt' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/past the end of empty\.txt \(0 lines\)/),
    });
  });

  it('strips CR of CRLF files and keeps UTF-8 intact', async () => {
    expect((await read(fx.root, { path: 'crlf.txt' })).output).toBe('1\tfirst\n2\tsecond');
    expect((await read(fx.root, { path: 'utf8.txt' })).output).toBe('1\tnaïve café — 日本語 😀');
  });

  it('shows a huge single line cut, quickly and in bounded memory', async () => {
    const started = Date.now();
    const r = await read(fx.root, { path: 'one-line.js' });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(r.status).toBe('truncated');
    expect(r.output.length).toBeLessThanOrEqual(4096);
    expect(r.output).toMatch(/^1\ty+ …\[line cut\]\n/);
  });

  it('shows text before a late NUL byte and stops there', async () => {
    const r = await read(fx.root, { path: 'late-nul.txt', end_line: 2 });
    expect(r).toEqual({ status: 'ok', output: '1\tok 1\n2\tok 2' });
    const all = await read(fx.root, { path: 'late-nul.txt', start_line: 4 });
    expect(all).toMatchObject({ status: 'error', message: 'read: late-nul.txt has binary data (a NUL byte) at line 4; not shown' });
  });

  it('follows a symlink that stays inside the root', async () => {
    expect((await read(fx.root, { path: 'links/inside', end_line: 1 })).output).toBe('1\timport os');
  });

  it('reads a file whose name starts with a dash', async () => {
    expect((await read(fx.root, { path: '-e' })).output).toBe('1\ta file whose name looks like a flag');
  });

  it('refuses bad ranges as error observations', async () => {
    expect(await read(fx.root, { path: 'lines.txt', start_line: 5, end_line: 4 })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/end_line/),
    });
    expect(await read(fx.root, { path: 'lines.txt', start_line: 0 })).toMatchObject({ status: 'error' });
  });

  it('times out on a deadline it cannot meet, with an error observation', async () => {
    // Line 2 of a 30 MB one-line file lies past 30 MB of scanning: more than 1 ms.
    const r = await read(fx.root, { path: 'one-line.js', start_line: 2 }, { timeoutMs: 1 });
    expect(r).toMatchObject({
      status: 'error',
      message: 'read timed out after 1 ms before reaching line 2; the file is too large to scan that far',
    });
  });
});
