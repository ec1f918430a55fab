import { TokenizerLoader, tokenizers } from '@lenml/tokenizers';
import type { ModelFolder } from './model-folder';

/**
 * The model's own tokenizer (its tokenizer.json, run by @lenml/tokenizers, a port of transformers.js'
 * tokenizers), split into the two parts the retriever needs separately: the text's tokens without special
 * tokens (so a long file can be cut into windows) and the special tokens the post-processor puts around a
 * single sequence (so every window is wrapped the way `encode(text)` would wrap it: [CLS] … [SEP] for BERT,
 * <s> … </s> for XLM-R, … <|endoftext|> for Qwen).
 */

export interface TextTokenizer {
  /** Token ids of `text`, no special tokens. */
  encode(text: string): number[];
  /** Special tokens before / after a single sequence. */
  prefix: readonly number[];
  suffix: readonly number[];
  padId: number;
}

/** Found by encoding this text with and without special tokens. */
const PROBE_TEXT = 'hello world';

export function createTextTokenizer(folder: Pick<ModelFolder, 'dir' | 'tokenizerJson' | 'tokenizerConfig'>): TextTokenizer {
  const config = { ...folder.tokenizerConfig };
  const known = (tokenizers.AutoTokenizer as unknown as { TOKENIZER_CLASS_MAPPING: Record<string, unknown> }).TOKENIZER_CLASS_MAPPING;
  const className = typeof config['tokenizer_class'] === 'string' ? config['tokenizer_class'].replace(/Fast$/, '') : undefined;
  // An unknown class makes the loader warn on the console and use the base class anyway: ask for it directly.
  if (className === undefined || !(className in known)) config['tokenizer_class'] = 'PreTrainedTokenizer';
  let tokenizer: tokenizers.PreTrainedTokenizer;
  try {
    tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON: folder.tokenizerJson, tokenizerConfig: config });
  } catch (error) {
    throw new Error(`embedding model ${folder.dir}: cannot load tokenizer.json: ${(error as Error).message}`, { cause: error });
  }
  const encode = (text: string): number[] => tokenizer.encode(text, { add_special_tokens: false });
  const plain = encode(PROBE_TEXT);
  const wrapped = tokenizer.encode(PROBE_TEXT, { add_special_tokens: true });
  const at = indexOfRun(wrapped, plain);
  if (plain.length === 0 || at < 0) {
    throw new Error(
      `embedding model ${folder.dir}: cannot tell the special tokens of tokenizer.json's post-processor ` +
        `(${JSON.stringify(PROBE_TEXT)} encodes to ${JSON.stringify(plain)} alone and ${JSON.stringify(wrapped)} with special tokens)`,
    );
  }
  return {
    encode,
    prefix: wrapped.slice(0, at),
    suffix: wrapped.slice(at + plain.length),
    padId: tokenizer.pad_token_id ?? 0,
  };
}

function indexOfRun(haystack: readonly number[], needle: readonly number[]): number {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
