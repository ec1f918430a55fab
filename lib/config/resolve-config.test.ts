import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../schemas/config';
import { resolveConfig } from './resolve-config';

const dir = mkdtempSync(path.join(os.tmpdir(), 'resolve-config-'));
writeFileSync(path.join(dir, 't.jsonl'), '');
writeFileSync(path.join(dir, 'i.jsonl'), '');
const base = {
  runId: 'r1',
  inputs: { trajectories: 't.jsonl', instances: 'i.jsonl' },
  downstream: {
    configurations: [{ name: 'baseline', source: 'none' }],
    baseline: 'baseline',
    agent: { kind: 'builtin', baseUrl: 'http://127.0.0.1:1/v1', model: 'm' },
    harness: { kind: 'local', interpreter: '/usr/bin/python3', testRunner: 'pytest' },
  },
  training: { modelDir: 'model', steps: 1 },
};

describe('the run config sandbox setting', () => {
  it('defaults to namespace isolation and reaches every section that runs agent tools', () => {
    const config = resolveConfig(base, 'test', dir);
    expect(config.sandbox).toEqual({ isolation: 'namespace' });
    expect(config.evaluation.sandbox).toEqual({ isolation: 'namespace' });
    expect(config.downstream?.agent).toMatchObject({ sandbox: { isolation: 'namespace' } });
    expect(config.training?.sandbox).toEqual({ isolation: 'namespace' });
  });

  it('carries filter-only, set once at the top level, to all of them', () => {
    const config = resolveConfig({ ...base, sandbox: { isolation: 'filter-only' } }, 'test', dir);
    expect(config.evaluation.sandbox).toEqual({ isolation: 'filter-only' });
    expect(config.downstream?.agent).toMatchObject({ sandbox: { isolation: 'filter-only' } });
    expect(config.training?.sandbox).toEqual({ isolation: 'filter-only' });
  });

  it('accepts its own resolved config again (the pipeline hands it to each stage, which validates it anew)', () => {
    const resolved = resolveConfig({ ...base, sandbox: { isolation: 'filter-only' } }, 'test', dir);
    const again = resolveConfig(JSON.parse(JSON.stringify(resolved)), 'workflow input', dir);
    expect(again.training?.sandbox).toEqual({ isolation: 'filter-only' });
    expect(again.evaluation.sandbox).toEqual({ isolation: 'filter-only' });
  });

  it('names the field and the allowed values of a bad setting', () => {
    expect(() => resolveConfig({ ...base, sandbox: { isolation: 'none' } }, 'cfg.json', dir)).toThrow(ConfigError);
    expect(() => resolveConfig({ ...base, sandbox: { isolation: 'none' } }, 'cfg.json', dir)).toThrow(
      /sandbox\.isolation: sandbox\.isolation must be "namespace"/,
    );
  });
});
