/**
 * The retrieval-quality evaluation (docs/design.md "Retrieval evaluation"; CodeGrep §4.2, Table 2; CodeScout §4.2,
 * Table 3, App. G): its config section (config.ts), the activities' inputs and outputs (activities.ts), the
 * summary (summary.ts) and the row artifacts (rows.ts). Pure zod and apache-arrow (plus lib/metrics'
 * constants): safe to import from workflow code.
 */
export * from './config';
export * from './activities';
export * from './summary';
export * from './rows';
