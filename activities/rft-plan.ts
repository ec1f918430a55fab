import * as rft from '../lib/rft';
import { PlanRftInputSchema, type PlanRftInput, type RftPlan } from '../schemas/rft';
import { invalidInput } from './kit';

/** The RFT split and plan (lib/rft planRft): the RL training samples without the RFT instances, and the sampling's hash. */
export async function planRftSampling(rawInput: PlanRftInput): Promise<RftPlan> {
  const input = PlanRftInputSchema.parse(rawInput);
  try {
    return await rft.planRft(input);
  } catch (error) {
    if (error instanceof rft.RftPlanError) throw invalidInput(error.message);
    throw error;
  }
}
