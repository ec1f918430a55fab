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

const ONE_COMMAND_PER_CALL = 'run one command (or one pipeline) per call';

export function tokenize(command: string): TokenizeResult {
  if (/[\n\r]/.test(command)) return refuse(`newlines are not allowed: ${ONE_COMMAND_PER_CALL}`);
  return new Tokenizer(command).run();
}

/** Where tokenizing goes on (an index in the command), or why the command is refused. */
type Step = number | { refused: string };

/**
 * The operator or character at `i` that is refused wherever it stands outside quotes, or null. '#' and '~'
 * are refused only at the start of a word, where the shell would read a comment or a home directory.
 */
function unquotedRefusal(command: string, i: number, inWord: boolean): string | null {
  const c = command[i]!;
  if (c === '\n' || c === '\r') return `newlines are not allowed: ${ONE_COMMAND_PER_CALL}`;
  if (c === '\0') return 'the command contains a NUL byte';
  if (c === ';') return `';' is not allowed: ${ONE_COMMAND_PER_CALL}`;
  if (c === '&') {
    return command[i + 1] === '&'
      ? `'&&' is not allowed: ${ONE_COMMAND_PER_CALL}; commands already run in the repository root (no cd needed)`
      : "'&' (background jobs) is not allowed";
  }
  if (c === '>' || c === '<') return `redirection '${c}' is not allowed: the terminal is read-only and output is returned to you`;
  if (c === '`') return 'command substitution (backticks) is not allowed';
  if (c === '(' || c === ')') return `'${c}' is not allowed (no subshells); quote it or escape it as \\${c} for find`;
  if (!inWord && c === '#') return "comments ('#') are not allowed";
  if (!inWord && c === '~') return "'~' expansion is not available: paths are relative to the repository root";
  return null;
}

/** One pass over a command: the words read so far, the word being read, and the commands of the pipeline. */
class Tokenizer {
  private readonly pipeline: Word[][] = [];
  private words: Word[] = [];
  private text = '';
  private glob = '';
  private hasGlob = false;
  private inWord = false;

  constructor(private readonly command: string) {}

  run(): TokenizeResult {
    let i = 0;
    while (i < this.command.length) {
      const step = this.step(i);
      if (typeof step !== 'number') return refuse(step.refused);
      i = step;
    }
    this.endWord();
    if (this.words.length === 0) return refuse(this.pipeline.length > 0 ? "'|' needs a command on both sides" : 'the command is empty');
    this.pipeline.push(this.words);
    return { ok: true, pipeline: this.pipeline };
  }

  /** Reads what starts at `i` outside quotes: a blank, a '|', a quoted part, an escape or one character. */
  private step(i: number): Step {
    const c = this.command[i]!;
    if (c === ' ' || c === '\t') {
      this.endWord();
      return i + 1;
    }
    if (c === '|') return this.pipe(i);
    const refused = unquotedRefusal(this.command, i, this.inWord);
    if (refused !== null) return { refused };
    if (c === '$') return this.dollar(i);
    if (c === '\\') return this.escaped(i);
    if (c === "'") return this.singleQuoted(i);
    if (c === '"') return this.doubleQuoted(i);
    this.inWord = true;
    this.text += c;
    if (GLOB_CHARS.has(c)) this.hasGlob = true;
    this.glob += c;
    return i + 1;
  }

  private endWord(): void {
    if (!this.inWord) return;
    this.words.push({ text: this.text, glob: this.hasGlob ? this.glob : null });
    this.text = '';
    this.glob = '';
    this.hasGlob = false;
    this.inWord = false;
  }

  /** A character that stands for itself: in the glob too, where it is escaped if it is a metacharacter. */
  private literal(c: string): void {
    this.inWord = true;
    this.text += c;
    this.glob += GLOB_CHARS.has(c) || c === '\\' || c === ']' ? `\\${c}` : c;
  }

  private pipe(i: number): Step {
    if (this.command[i + 1] === '|') return { refused: `'||' is not allowed: ${ONE_COMMAND_PER_CALL}` };
    this.endWord();
    if (this.words.length === 0) return { refused: "'|' needs a command on both sides" };
    this.pipeline.push(this.words);
    this.words = [];
    return i + 1;
  }

  /** A '$' is literal unless it starts a variable or a substitution (quoted or not), which are refused. */
  private dollar(i: number): Step {
    const next = this.command[i + 1];
    if (next !== undefined && /[A-Za-z0-9_{(@*#?$!-]/.test(next)) {
      return { refused: 'variables and $(...) substitution are not allowed' };
    }
    this.literal('$');
    return i + 1;
  }

  private escaped(i: number): Step {
    if (i + 1 >= this.command.length) return { refused: 'the command ends with a lone backslash' };
    const next = this.command[i + 1]!;
    if (next === '\n') return { refused: `newlines are not allowed: ${ONE_COMMAND_PER_CALL}` };
    this.literal(next);
    return i + 2;
  }

  private singleQuoted(i: number): Step {
    const close = this.command.indexOf("'", i + 1);
    if (close === -1) return { refused: 'unterminated single quote' };
    this.inWord = true;
    for (const ch of this.command.slice(i + 1, close)) this.literal(ch);
    return close + 1;
  }

  /** "...": literal but for '$' (see dollar) and the escapes \" \\ \$ \`; backticks are refused. */
  private doubleQuoted(i: number): Step {
    this.inWord = true;
    let j = i + 1;
    for (;;) {
      if (j >= this.command.length) return { refused: 'unterminated double quote' };
      const ch = this.command[j]!;
      if (ch === '"') return j + 1;
      if (ch === '`') return { refused: 'command substitution (backticks) is not allowed' };
      if (ch === '$') {
        const step = this.dollar(j);
        if (typeof step !== 'number') return step;
        j = step;
        continue;
      }
      if (ch === '\\' && j + 1 < this.command.length && '"\\$`'.includes(this.command[j + 1]!)) {
        this.literal(this.command[j + 1]!);
        j += 2;
        continue;
      }
      if (ch === '\\' && this.command[j + 1] === '\n') return { refused: 'newlines are not allowed' };
      if (ch === '\n' || ch === '\r') return { refused: `newlines are not allowed: ${ONE_COMMAND_PER_CALL}` };
      this.literal(ch);
      j += 1;
    }
  }
}
