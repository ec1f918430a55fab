import { describe, expect, it } from 'vitest';
import type { EnvironmentResult } from '../schemas/environment';
import type { PipelineResult } from '../workflows/pipeline';
import { formatEnvironmentSummary, formatFinalScreen } from './summary-table';

const ref = (uri: string, rows: number) => ({ uri, rows }) as unknown as EnvironmentResult['worktrees'];
const why = 'no local mirror of django/django: looked for /m/django__django.git';

const environment = {
  worktrees: ref('/runs/demo/environment/worktrees.parquet', 52),
  dropped: ref('/runs/demo/environment/dropped.parquet', 3),
  samples: ref('/runs/demo/environment/samples.parquet', 13),
  materialize: {
    commits: 16,
    created: 13,
    reused: 0,
    repaired: 0,
    failed: 3,
    repos: 5,
    medianMs: 400,
    bareBytes: 1,
    worktreeBytes: 1,
    estimatedFullClonesBytes: 2,
    savedRatio: 0.5,
    unreachable: [why],
    onUnavailable: 'skip',
    droppedSamples: 3,
    dropped: [
      { instanceId: 'django__django-1', repo: 'django/django', commit: 'a'.repeat(40), reason: why },
      { instanceId: 'django__django-2', repo: 'django/django', commit: 'b'.repeat(40), reason: why },
      { instanceId: 'django__django-3', repo: 'django/django', commit: 'c'.repeat(40), reason: why },
    ],
  },
  groundTruth: {
    samples: 16,
    withGroundTruth: 13,
    withoutWorktree: 3,
    patchErrors: 0,
    preImageErrors: 0,
    files: 20,
    modules: 5,
    functions: 9,
    fromFileChanges: 0,
  },
} as EnvironmentResult;

describe('environment summary', () => {
  it('counts and lists the dropped samples by repository and reason, and names the Parquet table', () => {
    const text = formatEnvironmentSummary(environment);
    expect(text).toMatch(/dropped \(onUnavailable: skip\)\s+3 samples of 3 unavailable commits; the rest go on/);
    expect(text).toContain(`3 × django/django: ${why}`);
    expect(text).toContain('/runs/demo/environment/dropped.parquet (3 rows)');
    expect(text).toMatch(/ground truth\s+13 of 13 samples/);
  });

  it("shows this run's own disk beside the shared folders', and the budget when set", () => {
    const MiB = 1024 * 1024;
    const withRun = {
      ...environment,
      materialize: {
        ...environment.materialize,
        bareBytes: 988 * MiB,
        worktreeBytes: 4700 * MiB,
        estimatedFullClonesBytes: 43800 * MiB,
        run: { worktrees: 13, worktreeBytes: 185 * MiB, repos: 4, bareBytes: 25 * MiB },
        budget: { maxBytes: 2048 * MiB, removedWorktrees: 7, removedBytes: 3000 * MiB, bytesAfter: 1700 * MiB, overBudget: false },
      },
    } as EnvironmentResult;
    const text = formatEnvironmentSummary(withRun);
    expect(text).toMatch(/disk \(this run\)\s+13 worktrees 185\.0 MiB \+ bare 25\.0 MiB \(4 repositories\)/);
    expect(text).toMatch(/disk \(shared folders\)\s+bare 988\.0 MiB \+ worktrees 4700\.0 MiB vs 43800\.0 MiB as full clones/);
    expect(text).toMatch(/disk budget\s+2048\.0 MiB for worktrees: 7 idle removed \(3000\.0 MiB\), 1700\.0 MiB now/);
    expect(text).not.toContain('still over');
    const over = { ...withRun, materialize: { ...withRun.materialize, budget: { ...withRun.materialize.budget!, overBudget: true } } };
    expect(formatEnvironmentSummary(over)).toContain('still over: the rest are in use');
    // A summary from before the run's own figures existed keeps the one shared row.
    expect(formatEnvironmentSummary(environment)).toMatch(/\bdisk\s+bare /);
  });
});

describe('final screen', () => {
  const estimate = (value: number) => ({ value, ci: { low: value / 2, high: value * 1.5 } });
  const retriever = (name: string, kind: string, f: number) => ({
    name,
    kind,
    instances: 13,
    failed: 0,
    table2: {
      fBetaMean: estimate(f),
      fBetaMedian: estimate(0),
      precision: estimate(f),
      recall: estimate(f),
      shareHighQuality: estimate(0),
      turns: null,
    },
    table3: { file: { f1: estimate(f), precision: estimate(f), recall: estimate(f) }, module: null, function: null },
  });
  const result = {
    runId: 'demo',
    outcomes: [
      { stage: 'catm', status: 'completed', reason: null },
      { stage: 'environment', status: 'completed', reason: null },
      { stage: 'training', status: 'completed', reason: null },
      { stage: 'evaluation', status: 'completed', reason: null },
    ],
    environment,
    training: { report: { smokeRun: true, html: '/runs/demo/training/report/index.html' } },
    evaluation: {
      summaryValues: {
        instances: 13,
        fileTarget: 'gold-patch',
        beta: 0.5,
        highQualityThreshold: 0.8,
        bootstrap: { samples: 1000, seed: 0, confidence: 0.95 },
        retrievers: [retriever('bm25', 'bm25', 0.162), retriever('minilm', 'dense', 0.194), retriever('trained', 'agent', 0.01)],
        failedRetrievers: [],
        servedPolicies: [
          {
            retriever: 'trained',
            runId: 'demo',
            step: 2,
            adapterSha256: 'eeb1a50a0efafacce89a008a0670044388279af17fe0de241aaa4f4789ef6871',
            baseModel: '/p/runs/tiny-model',
            model: 'demo/step-00000002',
            backend: 'hf',
            answerFormat: 'codegrep',
            maxTurns: 2,
          },
        ],
      },
      report: { html: '/runs/demo/evaluation/report.html', markdown: '/runs/demo/evaluation/report.md' },
    },
  } as unknown as PipelineResult;

  it('shows the stages, the retrieval table with intervals, where things are, and what an endpoint adds', () => {
    const screen = formatFinalScreen(result, {
      runDir: '/runs/demo',
      webUi: 'http://localhost:8233/namespaces/codegrep/workflows/demo%2Fpipeline',
      judgeMode: 'none',
      stages: ['catm', 'environment', 'training', 'evaluation'],
      retrievers: [{ name: 'minilm', kind: 'dense', bm25Candidates: 20, maxChunksPerFile: 2, modelDir: '/p/.models/all-MiniLM-L6-v2' }],
    });
    expect(screen).toContain('environment ✓ (13 samples, 3 dropped)');
    expect(screen).toContain('training ✓ (SMOKE RUN');
    expect(screen).toMatch(/bm25 \(bm25\)\s+0\.162 \[0\.08, 0\.24\]/);
    expect(screen).toMatch(/minilm \(dense\)\s+0\.194/);
    expect(screen).toMatch(/trained \(agent\)\s+0\.010/);
    expect(screen).toContain(
      'trained: checkpoint step 2 of run demo (demo/step-00000002, hf, adapter eeb1a50a0efa) — a toy model on a CPU: its numbers mean nothing',
    );
    expect(screen).toContain(
      "minilm: all-MiniLM-L6-v2 embeddings of each instance's BM25 top-20 files (the BM25 prefilter, not the papers' whole-repository dense baseline), their first 2 chunks",
    );
    expect(screen).toContain('report     /runs/demo/evaluation/report.html');
    expect(screen).toContain('Web UI     http://localhost:8233/');
    expect(screen).toContain('artifacts  /runs/demo/  (Parquet + manifest per stage: catm/, environment/, training/, evaluation/)');
    expect(screen).toContain('the LLM judge and downstream injection need an OpenAI-compatible endpoint');
    expect(screen).toContain('judge: { mode: llm, baseUrl:');
    expect(screen).toContain('stages: [catm, environment, training, evaluation, downstream]');
  });

  it('says under the stages when the run is a toy (the learn demo), and only then', () => {
    const context = { runDir: '/runs/demo-learn', webUi: 'http://x', judgeMode: 'none' as const, stages: ['training', 'evaluation'] };
    const toy = formatFinalScreen(result, { ...context, toyTask: 'a toy task on a CPU (lib/learn-task)' });
    const lines = toy.split('\n');
    expect(lines[lines.findIndex((l) => l.startsWith('  stages')) + 1]).toBe('  toy        a toy task on a CPU (lib/learn-task)');
    expect(formatFinalScreen(result, context)).not.toContain('  toy  ');
  });

  it('says nothing about an endpoint when the judge and downstream are on', () => {
    const screen = formatFinalScreen(result, { runDir: '/r', webUi: 'u', judgeMode: 'llm', stages: ['catm', 'environment', 'downstream'] });
    expect(screen).not.toContain('Not run here');
  });
});
