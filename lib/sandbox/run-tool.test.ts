import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CODEGREP_TOOL_NAMES, TERMINAL_TOOL_NAMES, ToolResultSchema, toolDefinitions } from '../../schemas/tools';
import { formatObservation, runTool } from './run-tool';
import { makeSandboxFixture, type SandboxFixture } from '../../test/fixtures/sandbox/fixture';

let fx: SandboxFixture;
beforeAll(async () => {
  fx = await makeSandboxFixture();
});
afterAll(() => fx.cleanup());

describe('runTool', () => {
  it('runs each tool from a JSON-string argument, as the model sends it', async () => {
    expect(await runTool(fx.root, 'grep', '{"pattern": "shout", "path": null}')).toEqual({
      status: 'ok',
      output: 'docs/guide.md:1:Use helper() to shout.',
    });
    expect(await runTool(fx.root, 'glob', '{"pattern": "docs/*"}')).toEqual({ status: 'ok', output: 'docs/guide.md' });
    expect(await runTool(fx.root, 'read', { path: 'README.md', start_line: 1, end_line: null })).toEqual({
      status: 'ok',
      output: '1\t# Demo repository',
    });
    expect(await runTool(fx.root, 'terminal', { command: 'wc -l README.md' })).toEqual({ status: 'ok', output: '1 README.md' });
  });

  it('turns every kind of bad call into an error observation naming the problem', async () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ['search', {}, /unknown tool "search"; available tools: grep, glob, read, terminal/],
      ['grep', '{"pattern": ', /arguments for grep are not valid JSON/],
      ['grep', '[1]', /must be a JSON object/],
      ['grep', {}, /invalid arguments for grep: pattern: /],
      ['grep', { pattern: '' }, /pattern: Too small/],
      ['grep', { pattern: 'x', include: '*.py' }, /Unrecognized key: "include"/],
      ['read', { path: 'README.md', start_line: 0 }, /start_line: Too small/],
      ['read', { path: 'README.md', start_line: '3' }, /start_line: Invalid input: expected number/],
      ['read', { path: 'README.md', start_line: 5, end_line: 2 }, /end_line: end_line must be greater than or equal to start_line/],
      ['terminal', { command: 'x'.repeat(5000) }, /command: Too big/],
      ['glob', { pattern: 'a\u0000b' }, /must not contain a NUL byte/],
    ];
    for (const [name, args, message] of cases) {
      const result = await runTool(fx.root, name, args);
      expect(ToolResultSchema.parse(result).status, name).toBe('error');
      expect(result.message, JSON.stringify(args)).toMatch(message);
    }
  });

  it('formats observations for the model', () => {
    expect(formatObservation({ status: 'ok', output: 'a' })).toBe('a');
    expect(formatObservation({ status: 'truncated', output: 'a\n[cut]', message: '[cut]' })).toBe('a\n[cut]');
    expect(formatObservation({ status: 'error', output: '', message: 'no such file' })).toBe('Error: no such file');
    expect(formatObservation({ status: 'error', output: 'partial', message: 'timed out' })).toBe('partial\nError: timed out');
  });
});

describe('tool definitions for the model', () => {
  it('are OpenAI function tools whose parameters come from the zod schemas', () => {
    const defs = toolDefinitions(CODEGREP_TOOL_NAMES);
    expect(defs.map((d) => d.function.name)).toEqual(['grep', 'glob', 'read']);
    for (const def of defs) {
      expect(def.type).toBe('function');
      expect(def.function.description.length).toBeGreaterThan(40);
      expect(def.function.parameters).toMatchObject({ type: 'object', additionalProperties: false });
      expect(def.function.parameters).not.toHaveProperty('$schema');
    }
    expect(defs[0]!.function.parameters).toMatchObject({
      required: ['pattern'],
      properties: { pattern: { type: 'string' }, path: { type: 'string' }, glob: { type: 'string' } },
    });
    expect(defs[2]!.function.parameters).toMatchObject({
      required: ['path'],
      properties: { start_line: { type: 'integer', minimum: 1 }, end_line: { type: 'integer', minimum: 1 } },
    });
    const [terminal] = toolDefinitions(TERMINAL_TOOL_NAMES);
    expect(terminal!.function).toMatchObject({ name: 'terminal', parameters: { required: ['command'] } });
    expect(JSON.parse(JSON.stringify(defs))).toEqual(defs);
  });
});
