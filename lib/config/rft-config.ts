import path from 'node:path';
import { ConfigError, type PipelineConfig } from '../../schemas/config';
import type { RftConfig } from '../../schemas/rft';

/**
 * The `rft` section checked against the rest of the run config and its paths made absolute. CodeScout §4.1
 * trains RL "on 800 instances (not seen during RFT)", and an instance the student was fine-tuned on says nothing
 * about how well it generalises: an RFT instance that is also held out for validation or evaluation is refused
 * by name. (The RL training samples never include them: the rft stage hands training the samples without them.)
 */
export function resolveRftConfig(config: PipelineConfig, baseDir: string, source: string): RftConfig | undefined {
  const rft = config.rft;
  if (!rft) return undefined;
  const problems: string[] = [];
  if (!config.training) problems.push("rft: needs a `training` section (its model, recipe and limits are the student's)");
  const rftInstances = new Set(rft.instances);
  const overlap = (what: string, ids: readonly string[] | undefined) => {
    const shared = (ids ?? []).filter((id) => rftInstances.has(id));
    if (shared.length > 0)
      problems.push(
        `rft.instances and ${what} overlap: ${shared.slice(0, 10).join(', ')}${shared.length > 10 ? ` (and ${shared.length - 10} more)` : ''}; an instance the policy was fine-tuned on cannot be held out`,
      );
  };
  overlap('training.validation.instances', config.training?.validation?.instances);
  overlap('evaluation.instances', config.evaluation.instances);
  if (problems.length > 0) throw new ConfigError(`invalid config ${source}:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  const modelDir = rft.sft.modelDir === undefined ? undefined : path.resolve(baseDir, rft.sft.modelDir);
  return { ...rft, sft: { ...rft.sft, ...(modelDir ? { modelDir } : {}) } };
}
