export type { DownstreamAgent, DownstreamAgentResult, DownstreamRunContext } from './agents/agent';
export { createBuiltinAgent, type BuiltinAgentOptions } from './agents/builtin-agent';
export { builtinAgentTools } from './agents/builtin-tools';
export { BUILTIN_SYSTEM_PROMPT, builtinUserPrompt } from './agents/builtin-prompts';
export {
  compileCommand,
  splitCommandLine,
  CommandTemplateError,
  type CommandTemplate,
  type CompiledCommand,
} from './runs/command-template';
export { createEditor, runEditor, EDITOR_LIMITS, type Editor, type EditorOptions } from './agents/editor';
export type { Harness } from './harness/harness';
export { injectCandidateFiles, promptForConfiguration, CANDIDATE_FILES_OPEN, CANDIDATE_FILES_CLOSE, type Injection } from './runs/inject';
export { createLocalHarness, type LocalHarnessOptions, type TestRunner } from './harness/local-harness';
export { downstreamTable, formatDownstreamTable, formatTokens, type DownstreamTableOptions } from './report/metrics';
export { createOpenHandsAdapter, OPENHANDS_PLACEHOLDERS, type OpenHandsAdapterOptions } from './agents/openhands-adapter';
export { summarizeOpenHandsOutput, historyToMessages } from './agents/openhands-output';
export { PAPER_DOWNSTREAM_AGENT } from './params';
export { runDownstreamInstance, type RunDownstreamInstanceOptions, type DownstreamInstanceRun } from './runs/run-instance';
export { runProcess, type ProcessResult } from './runs/run-process';
export { gitRunWorktrees, type RunWorktree, type RunWorktreeFactory, type GitRunWorktreeOptions } from './runs/run-worktree';
export {
  createSweBenchHarness,
  SWEBENCH_PLACEHOLDERS,
  type SweBenchHarness,
  type SweBenchHarnessOptions,
} from './harness/swebench-adapter';
export { collectWorkspacePatch, workspacePatch, MAX_PATCH_BYTES, type WorkspacePatch } from './runs/workspace-patch';
// The stage around the pieces above (activities/downstream-*.ts).
export { agentFromConfig, harnessFromConfig } from './runs/from-config';
export { checkoutDirFor, downstreamPaths, fileSafe, lockPathFor, recordPathFor, trajectoryPathFor } from './layout';
export { planDownstreamRuns, planWarnings, type DownstreamPlanning, type PlanDownstreamOptions } from './plan/plan';
export { downstreamReportBlocks, countBy, type DownstreamReportInput, type ReportBlock } from './report/report';
export { renderDownstreamHtml, renderDownstreamMarkdown } from './report/report-render';
export { agentIdentity, describeAgent, describeHarness, harnessIdentity, runHash } from './runs/run-identity';
export { runPlannedPair, actionsOf, type PlannedPairRun, type RunPlannedPairOptions } from './runs/run-pair';
export { findPair, finishedRecord, finishedRows, hasFinishedRecord, loadPlan, recordExpectation } from './runs/run-records';
