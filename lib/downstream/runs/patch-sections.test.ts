import { describe, expect, it } from 'vitest';
import { headerPath, PatchSections } from './patch-sections';

const PATCH =
  'diff --git a/pkg/a.py b/pkg/a.py\nindex 1..2 100644\n--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1 +1 @@\n-diff --git x\n+diff --git y\n' +
  'diff --git "a/t\\303\\251st \\"q\\".txt" "b/t\\303\\251st \\"q\\".txt"\nnew file mode 100644\n--- /dev/null\n+++ "b/t\\303\\251st \\"q\\".txt"\n@@ -0,0 +1 @@\n+x\n' +
  'diff --git a/with space b/with space\ndeleted file mode 100644\n';

function split(chunks: Buffer[]): Array<{ path: string; text: string }> {
  const parts: Array<{ path: string; bytes: Buffer[] }> = [];
  const sections = new PatchSections({
    start: (file) => parts.push({ path: file, bytes: [] }),
    data: (bytes) => parts[parts.length - 1]!.bytes.push(Buffer.from(bytes)),
  });
  for (const chunk of chunks) sections.write(chunk);
  sections.end();
  return parts.map((p) => ({ path: p.path, text: Buffer.concat(p.bytes).toString('utf8') }));
}

describe('PatchSections', () => {
  it('splits a patch into its files, whatever the chunk boundaries, and loses no byte', () => {
    const bytes = Buffer.from(PATCH);
    const whole = split([bytes]);
    expect(whole.map((p) => p.path)).toEqual(['pkg/a.py', 'tést "q".txt', 'with space']);
    expect(whole.map((p) => p.text).join('')).toBe(PATCH);
    // A hunk line that merely contains the marker text stays in its file.
    expect(whole[0]!.text).toContain('+diff --git y\n');
    for (let size = 1; size <= 13; size++) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
      expect(split(chunks)).toEqual(whole);
    }
  });

  it('reads the path of unquoted and quoted headers', () => {
    expect(headerPath(Buffer.from('diff --git a/x b/x\n'))).toBe('x');
    expect(headerPath(Buffer.from('diff --git a/a b/c b/a b/c\n'))).toBe('a b/c');
    expect(headerPath(Buffer.from('diff --git "a/tab\\there" "b/tab\\there"\n'))).toBe('tab\there');
  });
});
