/**
 * The restricted terminal's tokenizer: a small subset of POSIX shell word splitting, written here so that no
 * shell ever sees the model's command. Supported: words separated by blanks, '...' (literal), "..." (where
 * \" \\ \$ \` are escapes), a backslash escaping the next character, and '|' between commands. Refused with
 * a message: ';', '&', '&&', '||', redirections '<' '>', '$VAR' / '${...}' / '$(...)', backticks,
 * subshells '(' ')', newlines, comments '#', '~' expansion and unterminated quotes.
 * A word with an unquoted '*', '?' or '[' is marked for filename expansion (done inside the root by the
 * terminal, as bash would); quoted metacharacters stay literal.
 */
export interface Word {
  /** The word after quote removal. */
  text: string;
  /** A bash-style glob (quoted metacharacters backslash-escaped) when the word has an unquoted * ? or [. */
  glob: string | null;
}

export type TokenizeResult = { ok: true; pipeline: Word[][] } | { ok: false; message: string };

const GLOB_CHARS = new Set(['*', '?', '[']);

function refuse(message: string): TokenizeResult {
  return { ok: false, message };
}

export function tokenize(command: string): TokenizeResult {
  const pipeline: Word[][] = [];
  let words: Word[] = [];
  let text = '';
  let glob = '';
  let hasGlob = false;
  let inWord = false;

  const endWord = () => {
    if (!inWord) return;
    words.push({ text, glob: hasGlob ? glob : null });
    text = '';
    glob = '';
    hasGlob = false;
    inWord = false;
  };
  const literal = (c: string) => {
    inWord = true;
    text += c;
    glob += GLOB_CHARS.has(c) || c === '\\' || c === ']' ? `\\${c}` : c;
  };

  if (/[\n\r]/.test(command)) return refuse('newlines are not allowed: run one command (or one pipeline) per call');
  let i = 0;
  while (i < command.length) {
    const c = command[i]!;
    if (c === ' ' || c === '\t') {
      endWord();
      i += 1;
      continue;
    }
    if (c === '\n' || c === '\r') return refuse('newlines are not allowed: run one command (or one pipeline) per call');
    if (c === '\0') return refuse('the command contains a NUL byte');
    if (c === '|') {
      if (command[i + 1] === '|') return refuse("'||' is not allowed: run one command (or one pipeline) per call");
      endWord();
      if (words.length === 0) return refuse("'|' needs a command on both sides");
      pipeline.push(words);
      words = [];
      i += 1;
      continue;
    }
    if (c === ';') return refuse("';' is not allowed: run one command (or one pipeline) per call");
    if (c === '&') {
      return refuse(
        command[i + 1] === '&'
          ? "'&&' is not allowed: run one command (or one pipeline) per call; commands already run in the repository root (no cd needed)"
          : "'&' (background jobs) is not allowed",
      );
    }
    if (c === '>' || c === '<') return refuse(`redirection '${c}' is not allowed: the terminal is read-only and output is returned to you`);
    if (c === '`') return refuse('command substitution (backticks) is not allowed');
    if (c === '(' || c === ')') return refuse(`'${c}' is not allowed (no subshells); quote it or escape it as \\${c} for find`);
    if (c === '$') {
      const next = command[i + 1];
      if (next !== undefined && /[A-Za-z0-9_{(@*#?$!-]/.test(next)) {
        return refuse('variables and $(...) substitution are not allowed');
      }
      literal(c);
      i += 1;
      continue;
    }
    if (!inWord && c === '#') return refuse("comments ('#') are not allowed");
    if (!inWord && c === '~') return refuse("'~' expansion is not available: paths are relative to the repository root");
    if (c === '\\') {
      if (i + 1 >= command.length) return refuse('the command ends with a lone backslash');
      const next = command[i + 1]!;
      if (next === '\n') return refuse('newlines are not allowed: run one command (or one pipeline) per call');
      literal(next);
      i += 2;
      continue;
    }
    if (c === "'") {
      const close = command.indexOf("'", i + 1);
      if (close === -1) return refuse('unterminated single quote');
      inWord = true;
      for (const ch of command.slice(i + 1, close)) literal(ch);
      i = close + 1;
      continue;
    }
    if (c === '"') {
      inWord = true;
      let j = i + 1;
      for (;;) {
        if (j >= command.length) return refuse('unterminated double quote');
        const ch = command[j]!;
        if (ch === '"') break;
        if (ch === '`') return refuse('command substitution (backticks) is not allowed');
        if (ch === '$') {
          const next = command[j + 1];
          if (next !== undefined && /[A-Za-z0-9_{(@*#?$!-]/.test(next)) {
            return refuse('variables and $(...) substitution are not allowed');
          }
          literal(ch);
          j += 1;
          continue;
        }
        if (ch === '\\' && j + 1 < command.length && '"\\$`'.includes(command[j + 1]!)) {
          literal(command[j + 1]!);
          j += 2;
          continue;
        }
        if (ch === '\\' && command[j + 1] === '\n') return refuse('newlines are not allowed');
        if (ch === '\n' || ch === '\r') return refuse('newlines are not allowed: run one command (or one pipeline) per call');
        literal(ch);
        j += 1;
      }
      i = j + 1;
      continue;
    }
    inWord = true;
    text += c;
    if (GLOB_CHARS.has(c)) hasGlob = true;
    glob += c;
    i += 1;
  }
  endWord();
  if (words.length === 0) return refuse(pipeline.length > 0 ? "'|' needs a command on both sides" : 'the command is empty');
  pipeline.push(words);
  return { ok: true, pipeline };
}
