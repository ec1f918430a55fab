/**
 * Downstream injection evaluation (docs/design.md "Downstream injection"; CodeGrep §4.1, §4.3, §5.3, App. E; CodeScout
 * §6.1), one file per concern: the config section, the inputs it reads (instances, predictions rows), the agent's
 * tool arguments and outcomes, the artifacts it writes (plan, run records, runs.parquet, table.json) and the
 * activities' inputs and outputs. Pure zod and apache-arrow: safe to import from workflow code. The code that
 * produces these lives in lib/downstream/.
 */
export * from './activity-io';
export * from './config';
export * from './editor-tool';
export * from './injection';
export * from './instance';
export * from './outcomes';
export * from './plan';
export * from './predictions-row';
export * from './run-record';
export * from './runs';
export * from './table';
