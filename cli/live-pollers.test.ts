import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { isExitedLocalProcess } from './live-pollers';

describe('isExitedLocalProcess', () => {
  it('tells an exited local worker from a live one, and trusts what it cannot check', () => {
    const host = os.hostname();
    const exited = spawnSync('true').pid!; // reaped: its pid is free
    expect(isExitedLocalProcess(`${exited}@${host}`)).toBe(true);
    expect(isExitedLocalProcess(`${process.pid}@${host}`)).toBe(false);
    // Another machine's worker, or an identity that is not the SDK's `<pid>@<host>`: not this machine's to judge.
    expect(isExitedLocalProcess(`${exited}@some-other-node`)).toBe(false);
    expect(isExitedLocalProcess('gpu-node-7 worker')).toBe(false);
  });
});
