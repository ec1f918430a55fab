import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { episodeToolDefinitions } from '../agent';
import { lastTurnReminder, systemPrompt, userPrompt } from '../agent/prompts';
import { resolveAgentLimits } from '../agent/limits';
import { CODEGREP_TOOL_NAMES } from '../../schemas/tools';
import { COMPONENTS, type ComponentInstance } from './component-repos';
import { runProgram } from './run-program';

/**
 * A tokenizer for the tiny random model of the learnable task, trained on the task's own text: the episode's
 * real system prompt and tool definitions (lib/agent), the issues, the teacher's grep calls, grep's output lines
 * and the answers, with the component paths as single tokens (as trainer/tests/component_task.py does for the
 * trainer's own learning test). With the stock tiny tokenizer (320 byte-level merges) the prompt alone is ~3,100
 * tokens; the model then spends its few parameters on spelling, not on the task.
 */
export async function writeTaskTokenizer(
  outDir: string,
  instances: readonly ComponentInstance[],
  maxTurns: number,
  python: string,
  cwd: string,
): Promise<void> {
  const limits = resolveAgentLimits({ maxTurns });
  const corpus = [
    systemPrompt('codegrep', CODEGREP_TOOL_NAMES, limits),
    JSON.stringify(episodeToolDefinitions('codegrep')),
    lastTurnReminder('codegrep', maxTurns - 1, maxTurns),
  ];
  for (const i of instances) {
    corpus.push(
      userPrompt({ instanceId: i.instance_id, problemStatement: i.problem_statement, repo: i.repo }),
      JSON.stringify({ name: 'grep', arguments: { pattern: `def ${i.gold_function}\\b` } }),
      `${i.gold_file}:4:def ${i.gold_function}(value, count=3):`,
      `<answer>${JSON.stringify({ files: [i.gold_file] })}</answer>`,
    );
  }
  mkdirSync(outDir, { recursive: true });
  const corpusFile = path.join(outDir, 'corpus.json');
  writeFileSync(corpusFile, JSON.stringify(corpus));
  const script = `
import json, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from trainer.random_model import MARKUP_TOKENS, QWEN_LIKE_CHAT_TEMPLATE, SPECIAL_TOKENS
corpus = json.load(open(sys.argv[1]))
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIAL_TOKENS,
                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                               additional_special_tokens=["<|im_start|>"])
fast.add_tokens(MARKUP_TOKENS + json.loads(sys.argv[3]))
fast.chat_template = QWEN_LIKE_CHAT_TEMPLATE
fast.save_pretrained(sys.argv[2])
`;
  await runProgram(python, ['-c', script, corpusFile, outDir, JSON.stringify(COMPONENTS.map((c) => `src/${c}.py`))], { cwd });
}
