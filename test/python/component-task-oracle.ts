import { createInterface } from 'node:readline';
import { findAnswerBlock, parseCodeGrepAnswer } from '../../lib/agent/answer-codegrep';
import { parseQwen3Assistant } from '../../lib/agent/qwen3-format';
import { fileScores } from '../../lib/metrics/levels';
import { pairedSignFlipTest } from '../../lib/stats';

/**
 * The project's own parsing, reward and paired test for the trainer's learning check (trainer/tests/component_task.py),
 * one JSON request per stdin line, one JSON reply per stdout line, so the Python test environment judges the
 * policy's text exactly as lib/ does instead of a second implementation:
 *   {"op": "parse", "text"}                    → {"toolCalls": [{name, arguments}], "malformed": n, "files": [...] | null}
 *       (lib/agent/qwen3-format.ts, lib/agent/answer-codegrep.ts: files = null when there is no valid answer)
 *   {"op": "file_reward", "predicted", "gold"} → {"f": Fβ_file, "precision", "recall"} (lib/metrics/levels.ts fileScores,
 *       β = lib/metrics/params.ts F_BETA: CodeGrep's file-level term, §3.5 Eq. 8)
 *   {"op": "paired", "before", "after"}        → lib/stats/paired-test.ts pairedSignFlipTest
 * An error becomes {"error": message} on that line; the process serves until stdin closes.
 */

function answer(request: Record<string, unknown>): unknown {
  switch (request.op) {
    case 'parse': {
      const text = String(request.text ?? '');
      const parsed = parseQwen3Assistant(text);
      const toolCalls = parsed.toolCalls.flatMap((c) => (c.kind === 'call' ? [{ name: c.name, arguments: c.arguments }] : []));
      const block = findAnswerBlock(parsed.content);
      let files: string[] | null = null;
      if (block.kind === 'complete') {
        const result = parseCodeGrepAnswer(block.body, '/repo');
        if (result.ok) files = result.answer.files;
      }
      return { toolCalls, malformed: parsed.toolCalls.length - toolCalls.length, files };
    }
    case 'file_reward': {
      const s = fileScores(request.predicted as string[], request.gold as string[]);
      return { f: s.f, precision: s.precision, recall: s.recall };
    }
    case 'paired':
      return pairedSignFlipTest(request.before as number[], request.after as number[]);
    default:
      throw new Error(`unknown op ${JSON.stringify(request.op)}`);
  }
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (!line.trim()) return;
  let reply: unknown;
  try {
    reply = answer(JSON.parse(line) as Record<string, unknown>);
  } catch (error) {
    reply = { error: error instanceof Error ? error.message : String(error) };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
});
