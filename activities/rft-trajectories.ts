import * as rft from '../lib/rft';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { WriteRftTrajectoriesInputSchema, type WriteRftTrajectoriesInput } from '../schemas/rft';

/** The RFT artifact: every rollout with its kept flag, and the kept ones' token ids and policy mask (trainer.sft's tokens_out). */
export async function writeRftTrajectories(rawInput: WriteRftTrajectoriesInput): Promise<ArtifactRef> {
  const input = WriteRftTrajectoriesInputSchema.parse(rawInput);
  return rft.writeRftTrajectories(input.runDir, input.sampled, input.tokensPath);
}
