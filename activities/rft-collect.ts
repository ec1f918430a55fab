import * as rft from '../lib/rft';
import { CollectRftInputSchema, type CollectRftInput, type CollectRftOutput } from '../schemas/rft';
import { invalidInput } from './kit';

/** Every shard's rollouts as `rft/sampled.parquet`, and the kept ones as trainer.sft's examples file. */
export async function collectRftTrajectories(rawInput: CollectRftInput): Promise<CollectRftOutput> {
  const input = CollectRftInputSchema.parse(rawInput);
  const collected = await rft.collectRft(input.runDir, input.shards);
  if (collected.kept === 0)
    throw invalidInput(
      `rft: none of the ${collected.total} sampled rollouts reached the keep threshold (${collected.failed} failed); nothing to fine-tune on (see ${collected.sampled.uri})`,
    );
  return collected;
}
