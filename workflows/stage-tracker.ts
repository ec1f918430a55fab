import { SearchAttributeType, defineSearchAttributeKey } from '@temporalio/common';
import { setCurrentDetails, setHandler, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { StageProgress, StageState, WorkflowProgress } from '../schemas/progress';
import { progressQuery, stageProgressSignal } from './messages';

// Literal names, not temporal.config.ts: workflow code must not depend on the worker's environment.
const runKey = defineSearchAttributeKey('CodegrepRun', SearchAttributeType.KEYWORD);
const stageKey = defineSearchAttributeKey('CodegrepStage', SearchAttributeType.KEYWORD);
const recipeKey = defineSearchAttributeKey('CodegrepRecipe', SearchAttributeType.KEYWORD);

/**
 * Keeps a workflow's stage table: serves the `progress` query, upserts the search attributes per stage and
 * renders the Web UI's current details. Progress comes from the workflow itself (finished activities, see
 * `progress()`); a running activity's own progress is in its heartbeat details, which the CLI reads from the
 * workflow's description. Activities no longer signal: a signal per few seconds made histories grow with the
 * length of the run (README "History bounds"). The `stageProgress` handler stays for signals of activities started by an
 * older worker.
 */
export class StageTracker {
  private readonly state: WorkflowProgress;

  constructor(runId: string, recipe: string, stages: readonly string[]) {
    this.state = {
      runId,
      workflow: workflowInfo().workflowType,
      currentStage: null,
      stages: Object.fromEntries(
        stages.map((stage): [string, StageState] => [
          stage,
          { status: 'pending', progress: null, startedAt: null, finishedAt: null, note: null },
        ]),
      ),
      children: {},
      done: false,
    };
    upsertSearchAttributes([
      { key: runKey, value: runId },
      { key: recipeKey, value: recipe },
    ]);
    setHandler(progressQuery, () => this.state);
    setHandler(stageProgressSignal, (progress) => this.progress(progress));
    this.render();
  }

  start(stage: string): void {
    const entry = this.entry(stage);
    entry.status = 'running';
    entry.startedAt = new Date().toISOString();
    this.state.currentStage = stage;
    upsertSearchAttributes([{ key: stageKey, value: stage }]);
    this.render();
  }

  finish(stage: string, status: 'completed' | 'cached' | 'skipped' | 'failed', note?: string): void {
    const entry = this.entry(stage);
    entry.status = status;
    entry.finishedAt = new Date().toISOString();
    if (note !== undefined) entry.note = note;
    if (entry.progress && entry.progress.total !== null && status === 'completed') {
      entry.progress = { ...entry.progress, done: entry.progress.total };
    }
    this.render();
  }

  child(stage: string, workflowId: string): void {
    this.state.children[stage] = workflowId;
  }

  complete(): void {
    this.state.done = true;
    this.state.currentStage = null;
    upsertSearchAttributes([{ key: stageKey, value: 'done' }]);
    this.render();
  }

  /** Sets a stage's progress (no history event: it changes the query answer and the current details). */
  progress(progress: StageProgress): void {
    const entry = this.state.stages[progress.stage];
    if (!entry) return; // a stage this workflow does not display (e.g. a child's sub-stage)
    if (entry.status === 'pending') entry.status = 'running';
    entry.progress = progress;
    this.render();
  }

  private entry(stage: string): StageState {
    const entry = this.state.stages[stage];
    if (!entry) throw new Error(`unknown stage "${stage}"`);
    return entry;
  }

  /** Markdown for the Web UI's "Current details" panel. */
  private render(): void {
    const lines = [
      `**codegrep ${this.state.workflow}** run \`${this.state.runId}\``,
      '',
      '| stage | status | progress |',
      '| --- | --- | --- |',
    ];
    for (const [name, entry] of Object.entries(this.state.stages)) {
      const p = entry.progress;
      const counts =
        p && Object.keys(p.counts).length > 0
          ? ' (' +
            Object.entries(p.counts)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ') +
            ')'
          : '';
      const amount = p ? `${p.done}${p.total !== null ? ` / ${p.total}` : ''} ${p.unit}${counts}` : '';
      lines.push(`| ${name} | ${entry.status}${entry.note ? ` — ${entry.note}` : ''} | ${amount} |`);
    }
    setCurrentDetails(lines.join('\n'));
  }
}
