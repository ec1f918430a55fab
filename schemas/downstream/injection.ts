import { z } from 'zod';

/**
 * What goes into the agent's prompt (CodeGrep §4.3 / App. E; CodeScout §6.1):
 * - `none`: the issue unchanged (the no-retrieval baseline);
 * - `oracle`: the files the gold patch changes;
 * - `predictions`: a retriever's files for the instance, in its order;
 * - `agent`: the files a trained policy (a training checkpoint codegrep serves itself) finds for the instance, in
 *   its order (README "Serving and evaluating the trained policy").
 * `k` keeps only the first k files; absent means all of them (App. E's K = 2 is BM25's own top-K, applied by
 * the retriever; setting k here cuts again).
 */
export const InjectionSourceSchema = z.enum(['none', 'oracle', 'predictions', 'agent']);
export type InjectionSource = z.infer<typeof InjectionSourceSchema>;

export const InjectionConfigurationSchema = z.object({
  name: z.string().trim().min(1, 'a configuration needs a name (the row label of Table 3, e.g. "baseline", "bm25-top2")'),
  source: InjectionSourceSchema,
  k: z.number().int().min(1, 'k must be at least 1 (leave it out to inject every file)').optional(),
});
export type InjectionConfiguration = z.infer<typeof InjectionConfigurationSchema>;
