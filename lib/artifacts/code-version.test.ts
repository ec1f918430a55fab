import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { codeVersion } from './code-version';

describe('codeVersion', () => {
  it("is the checkout's HEAD short sha (git through lib/process), the same promise each call", async () => {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    expect(await codeVersion()).toBe(head);
    expect(codeVersion()).toBe(codeVersion());
  });
});
