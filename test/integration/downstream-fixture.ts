import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { DownstreamInstanceInput } from '../../schemas/downstream';
import { reply, type ChatRequestBody, type ReplyScript, type ScriptedReply, type ScriptedUsage } from '../support/scripted-openai-server';
import { git } from '../support/fixture-repos';

/**
 * The downstream integration tests' world: a real Python repository `acme/calc` with three bugs, each one a
 * SWE-bench-style instance whose FAIL_TO_PASS test fails at the base commit and passes after the gold patch
 * (one instance also has a test_patch), published as a bare mirror `<mirrors>/acme__calc.git`; and the
 * script of the frozen downstream agent on the scripted OpenAI-compatible server.
 */
export const REPO = 'acme/calc';

interface Bug {
  id: string;
  file: string;
  before: string;
  after: string;
  statement: string;
  /** Words of the problem statement the agent script recognises the instance by. */
  marker: string;
}

export const BUGS: Bug[] = [
  {
    id: 'acme__calc-1',
    file: 'calc/ops.py',
    before: '    return a - b',
    after: '    return a + b',
    statement: 'add(2, 3) returns -1 instead of 5.',
    marker: 'add(2, 3)',
  },
  {
    id: 'acme__calc-2',
    file: 'calc/text.py',
    before: '    return s.lower()',
    after: '    return s.upper()',
    statement: "shout('hi') returns 'hi' instead of 'HI'.",
    marker: "shout('hi')",
  },
  {
    id: 'acme__calc-3',
    file: 'calc/units.py',
    before: '    return m * 10',
    after: '    return m * 100',
    statement: 'to_cm(2) returns 20 instead of 200.',
    marker: 'to_cm(2)',
  },
];

const FILES: Record<string, string> = {
  'calc/__init__.py': '',
  'calc/ops.py': 'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n',
  'calc/text.py': 'def shout(s):\n    return s.lower()\n\n\ndef whisper(s):\n    return s.casefold()\n',
  'calc/units.py': 'def to_cm(m):\n    return m * 10\n\n\ndef to_mm(m):\n    return 1000 * m\n',
  'tests/test_ops.py':
    'from calc.ops import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n',
  'tests/test_text.py':
    "from calc.text import shout, whisper\n\n\ndef test_shout():\n    assert shout('hi') == 'HI'\n\n\ndef test_whisper():\n    assert whisper('HI') == 'hi'\n",
  'tests/test_units.py':
    'from calc.units import to_cm, to_mm\n\n\ndef test_to_cm():\n    assert to_cm(2) == 200\n\n\ndef test_to_mm():\n    assert to_mm(2) == 2000\n',
  'README.md': '# calc\n',
  '.gitignore': '__pycache__/\n*.pyc\n',
};

export interface CalcFixture {
  mirrors: string;
  baseCommit: string;
  instances: DownstreamInstanceInput[];
  instancesPath: string;
  trajectoriesPath: string;
}

export interface CalcDownstreamInputOptions {
  runId: string;
  dataDir: string;
  fixture: CalcFixture;
  /** The scripted agent's endpoint (agentScript). */
  baseUrl: string;
  /** A Python with pytest (pythonWithPytest()). */
  python: string;
  concurrency: number;
  model?: string;
  /** A short activity heartbeat timeout, so a retry on a new worker starts within seconds (the kill tests). */
  heartbeatMs?: number;
  /** Over the `downstream` section's defaults. */
  downstream?: Record<string, unknown>;
}

/**
 * The `downstream` workflow input over this fixture: two configurations (no injection, oracle files), the
 * scripted builtin agent, the local pytest harness. downstream.test.ts, downstream-kill.test.ts and
 * bench/chaos.ts run with it.
 */
export function calcDownstreamInput(options: CalcDownstreamInputOptions): Record<string, unknown> {
  const { fixture } = options;
  return {
    runId: options.runId,
    dataDir: options.dataDir,
    inputs: { trajectories: fixture.trajectoriesPath, instances: fixture.instancesPath },
    environment: { repoSource: { kind: 'mirror-dir', dir: fixture.mirrors } },
    ...(options.heartbeatMs === undefined ? {} : { temporal: { activityTimeouts: { downstream: { heartbeatMs: options.heartbeatMs } } } }),
    downstream: {
      configurations: [
        { name: 'baseline', source: 'none' },
        { name: 'oracle', source: 'oracle' },
      ],
      baseline: 'baseline',
      agent: {
        kind: 'builtin',
        baseUrl: options.baseUrl,
        model: options.model ?? 'frozen-coder',
        maxRounds: 10,
        maxAttempts: 1,
        callTimeoutMs: 30_000,
      },
      harness: { kind: 'local', interpreter: options.python, testRunner: 'pytest', timeoutMs: 120_000 },
      runTimeoutMs: 180_000,
      concurrency: options.concurrency,
      ...options.downstream,
    },
  };
}

/** Builds the repository, its mirror, and `instances.jsonl` (plus an empty trajectories file) under `root`. */
export function buildCalcFixture(root: string): CalcFixture {
  const source = path.join(root, 'calc-src');
  mkdirSync(source, { recursive: true });
  git(root, 'init', '-q', '-b', 'main', source);
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(source, file)), { recursive: true });
    writeFileSync(path.join(source, file), text);
  };
  for (const [file, text] of Object.entries(FILES)) write(file, text);
  git(source, 'add', '-A');
  git(source, 'commit', '-q', '-m', 'calc with three bugs');
  const baseCommit = git(source, 'rev-parse', 'HEAD');

  const diff = () => git(source, 'diff', '--no-color') + '\n';
  const instances: DownstreamInstanceInput[] = BUGS.map((bug) => {
    write(bug.file, FILES[bug.file]!.replace(bug.before, bug.after));
    const patch = diff();
    git(source, 'checkout', '-q', '--', '.');
    return { instance_id: bug.id, repo: REPO, base_commit: baseCommit, problem_statement: `${bug.statement}\n`, patch };
  });
  // Instance 1: FAIL_TO_PASS / PASS_TO_PASS as JSON strings (SWE-bench's own encoding).
  Object.assign(instances[0]!, {
    FAIL_TO_PASS: JSON.stringify(['tests/test_ops.py::test_add']),
    PASS_TO_PASS: JSON.stringify(['tests/test_ops.py::test_mul']),
  });
  // Instance 2: a test_patch adding a test the fix must also pass.
  write('tests/test_text.py', `${FILES['tests/test_text.py']}\n\ndef test_shout_empty():\n    assert shout('') == ''\n`);
  const testPatch = diff();
  git(source, 'checkout', '-q', '--', '.');
  Object.assign(instances[1]!, {
    test_patch: testPatch,
    FAIL_TO_PASS: ['tests/test_text.py::test_shout', 'tests/test_text.py::test_shout_empty'],
    PASS_TO_PASS: ['tests/test_text.py::test_whisper'],
  });
  Object.assign(instances[2]!, { FAIL_TO_PASS: ['tests/test_units.py::test_to_cm'], PASS_TO_PASS: ['tests/test_units.py::test_to_mm'] });

  const mirrors = path.join(root, 'mirrors');
  mkdirSync(mirrors, { recursive: true });
  git(root, 'clone', '-q', '--bare', source, path.join(mirrors, 'acme__calc.git'));
  const instancesPath = path.join(root, 'instances.jsonl');
  writeFileSync(instancesPath, instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
  const trajectoriesPath = path.join(root, 'trajectories.jsonl');
  writeFileSync(trajectoriesPath, '');
  return { mirrors, baseCommit, instances, instancesPath, trajectoriesPath };
}

export { pythonWithPytest } from '../fixtures/downstream/fixture';

// ---------------------------------------------------------------------------------------------------------
// The scripted downstream agent

/** Which instance and which injection a request belongs to, read from its user message. */
export interface RequestIdentity {
  bug: Bug;
  /** The files of the `<candidate_files>` block, in order; [] when the prompt has none (the `none` configuration). */
  candidates: string[];
  /** Model calls already made in this conversation (assistant messages in the request). */
  round: number;
}

export function identify(body: ChatRequestBody): RequestIdentity {
  const messages = body.messages ?? [];
  const user = messages.find((m) => m.role === 'user');
  const text = typeof user?.content === 'string' ? user.content : '';
  const bug = BUGS.find((b) => text.includes(b.marker));
  if (!bug) throw new Error(`scripted agent: no known instance in the prompt: ${text.slice(0, 200)}`);
  const block = /<candidate_files>\n([\s\S]*?)<\/candidate_files>/.exec(text);
  const candidates = block
    ? block[1]!
        .split('\n')
        .filter((l) => l.startsWith('- '))
        .map((l) => l.slice(2))
    : [];
  return { bug, candidates, round: messages.filter((m) => m.role === 'assistant').length };
}

/** Exact usage per round, so the table's rounds and tokens are known in advance. */
export const USAGE = {
  explore: { prompt_tokens: 100, completion_tokens: 10 },
  giveUp: { prompt_tokens: 150, completion_tokens: 5 },
  search: { prompt_tokens: 200, completion_tokens: 20 },
  fixAfterSearch: { prompt_tokens: 300, completion_tokens: 30 },
  submitAfterSearch: { prompt_tokens: 400, completion_tokens: 40 },
  fix: { prompt_tokens: 120, completion_tokens: 12 },
  submit: { prompt_tokens: 180, completion_tokens: 18 },
  viewWrong: { prompt_tokens: 90, completion_tokens: 9 },
} satisfies Record<string, ScriptedUsage>;

const fixCall = (bug: Bug) => ({
  name: 'str_replace_editor',
  arguments: { command: 'str_replace', path: bug.file, old_str: bug.before, new_str: bug.after },
});

/**
 * The frozen agent's behaviour:
 * - no candidate files (`none`): on instances 1 and 2 it looks around once and gives up without an edit
 *   (2 rounds, unresolved); on instance 3 it searches, fixes and submits (3 rounds, resolved);
 * - candidate files whose first entry is the buggy file: it fixes and submits (2 rounds, resolved);
 * - candidate files that start elsewhere: it views the first one, then fixes and submits (3 rounds, resolved).
 */
export function agentReply({ bug, candidates, round }: RequestIdentity): ScriptedReply {
  if (candidates.length === 0) {
    if (bug.id !== 'acme__calc-3') {
      return round === 0
        ? reply.toolCalls([{ name: 'terminal', arguments: { command: 'ls calc' } }], { usage: USAGE.explore })
        : reply.text('I could not find the cause of this issue.', { usage: USAGE.giveUp });
    }
    if (round === 0) return reply.toolCalls([{ name: 'terminal', arguments: { command: 'rg -n to_cm calc' } }], { usage: USAGE.search });
    if (round === 1) return reply.toolCalls([fixCall(bug)], { usage: USAGE.fixAfterSearch });
    return reply.toolCalls([{ name: 'submit', arguments: { message: 'fixed' } }], { usage: USAGE.submitAfterSearch });
  }
  const offset = candidates[0] === bug.file ? 0 : 1;
  if (offset === 1 && round === 0)
    return reply.toolCalls([{ name: 'str_replace_editor', arguments: { command: 'view', path: candidates[0]! } }], {
      usage: USAGE.viewWrong,
    });
  if (round === offset) return reply.toolCalls([fixCall(bug)], { usage: USAGE.fix });
  return reply.toolCalls([{ name: 'submit', arguments: { message: 'fixed' } }], { usage: USAGE.submit });
}

export function agentScript(delayMs = 0): ReplyScript {
  return (body) => {
    const scripted = agentReply(identify(body));
    return delayMs > 0 && scripted.type !== 'hang' ? ({ ...scripted, delayMs } as ScriptedReply) : scripted;
  };
}

/** A request's (configuration kind, instance) key: `none` when the prompt has no candidate block. */
export function pairKey(body: ChatRequestBody | undefined): string {
  if (!body) return 'unreadable';
  const { bug, candidates } = identify(body);
  return `${candidates.length === 0 ? 'none' : 'injected'}/${bug.id}`;
}
