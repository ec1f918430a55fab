import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEditor } from '../../lib/downstream/agents/editor';
import { runTool } from '../../lib/sandbox/run-tool';
import { makeSandboxFixture, type SandboxFixture } from '../fixtures/sandbox/fixture';
import { recordAttack } from './attack-log';

/**
 * Finding 5: nothing outside the root is shown or probed. A link's own text is repository content (git
 * stores it as a blob) and ls -l shows it as it is; what it names does not exist in the tool sandbox
 * (test/security/namespace.test.ts follows every link with -L and finds nothing). find's forms that print or
 * match link texts are still refused; the probes (-lname, -ilname, -xtype, -readable, -printf %Y) are
 * refused; and a refusal reads the same whether the outside path exists or not.
 */
let fx: SandboxFixture;
let outsideWords: string[];

beforeAll(async () => {
  fx = await makeSandboxFixture();
  await fs.symlink('../../missing-outside.txt', path.join(fx.root, 'links', 'out-missing'));
  await fs.symlink(path.join(fx.parent, 'missing-dir', 'x'), path.join(fx.root, 'links', 'abs-missing'));
  outsideWords = [fx.parent, 'secret.txt', 'secret.py', 'outside/', 'missing-outside', 'missing-dir', '/proc/self/environ', fx.secretToken];
});
afterAll(() => fx.cleanup());

function expectNoOutsideName(text: string): void {
  for (const word of outsideWords) expect(text).not.toContain(word);
}

describe('finding 5: listings show link texts, never what they point at', () => {
  it.each(['ls -l links', 'ls -la links', 'ls -ls links', 'ls -lR links', 'ls -l links | grep out'])(
    '%s shows each link with its own text and nothing of its destination',
    async (command) => {
      const result = await runTool(fx.root, 'terminal', { command });
      const text = `${result.output}\n${result.message ?? ''}`;
      recordAttack('terminal', command, result.status === 'ok' && !text.includes(fx.secretToken) ? 'contained' : 'escaped');
      expect(result.status).toBe('ok');
      const shown = [...result.output.matchAll(/ (\S+) -> (.*)$/gm)].map(([, name, target]) => [name, target]);
      expect(shown.map(([name]) => name)).toContain('out-file');
      for (const [name, target] of shown) expect(target).toBe(await fs.readlink(path.join(fx.root, 'links', name!)));
      expect(text).not.toContain(fx.secretToken);
    },
  );

  it.each([
    ["find links -printf '%l\\n'", /-printf does not accept/],
    ["find links -printf '%p %Y\\n'", /-printf does not accept/],
    ["find links -printf '%10l'", /-printf does not accept/],
    ['find links -ls', /-ls is not allowed/],
    ["find links -lname '*secret*'", /-lname is not allowed/],
    ["find links -ilname '*SECRET*'", /-ilname is not allowed/],
    ['find links -xtype l', /-xtype is not allowed/],
    ['find links -readable', /-readable is not allowed/],
    ['find links -executable', /-executable is not allowed/],
  ])('%s is refused', async (command, reason) => {
    const result = await runTool(fx.root, 'terminal', { command });
    recordAttack('terminal', command, result.status === 'error' ? 'refused' : 'escaped');
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(reason) });
  });

  it('find -printf with entry-only directives still works', async () => {
    const result = await runTool(fx.root, 'terminal', { command: "find links -name 'out-*' -printf '%y %f\\n'" });
    expect(result.status).toBe('ok');
    expect(result.output.split('\n').sort()).toEqual(['l out-dir', 'l out-file', 'l out-missing']);
  });
});

describe('finding 5: refusals are no existence oracle', () => {
  const normalize = (text: string) => text.replace(/links\/[a-z-]+/g, 'LINK');
  const pairs: Array<[string, (p: string) => Promise<{ status: string; message?: string; output: string }>]> = [
    ['read', (p) => runTool(fx.root, 'read', { path: p })],
    ['grep path', (p) => runTool(fx.root, 'grep', { pattern: 'x', path: p })],
    ['terminal cat', (p) => runTool(fx.root, 'terminal', { command: `cat ${p}` })],
    ['terminal ls', (p) => runTool(fx.root, 'terminal', { command: `ls ${p}` })],
    ['terminal find', (p) => runTool(fx.root, 'terminal', { command: `find ${p}` })],
    ['editor view', (p) => runEditor(fx.root, { command: 'view', path: p })],
    ['read below the link', (p) => runTool(fx.root, 'read', { path: `${p}/below.txt` })],
    ['terminal ls -l', (p) => runTool(fx.root, 'terminal', { command: `ls -ld ${p}` })],
  ];
  it.each(pairs)('%s answers an outward link to an existing and to a missing target alike', async (label, call) => {
    const existing = await call('links/out-file');
    const missing = await call('links/out-missing');
    const absExisting = await call('links/abs-out');
    const absMissing = await call('links/abs-missing');
    recordAttack(
      label,
      'existence oracle through an outward link',
      normalize(existing.message ?? '') === normalize(missing.message ?? '') ? 'refused' : 'escaped',
    );
    for (const r of [existing, missing, absExisting, absMissing]) {
      expect(r.status).toBe('error');
      expect(r.message).toMatch(/resolves \(through a symlink\) to outside the repository root/);
      expectNoOutsideName(`${r.output}\n${r.message}`);
    }
    expect(normalize(missing.message!)).toBe(normalize(existing.message!));
    expect(normalize(absMissing.message!)).toBe(normalize(absExisting.message!));
  });

  it('glob expansion drops outward links whether or not their targets exist', async () => {
    const result = await runTool(fx.root, 'terminal', { command: 'ls -d links/*' });
    recordAttack('terminal', 'glob expansion over outward links', result.status === 'ok' ? 'contained' : 'escaped');
    expect(result.status).toBe('ok');
    // Only the inward link is kept (and, like every operand, passed as its canonical path).
    expect(result.output.split('\n').sort()).toEqual(['src/app.py']);
  });
});
