import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { StageProgressSchema, type StageProgress, type WorkflowProgress } from '../schemas/progress';

/**
 * The latest heartbeat progress of each running activity of a workflow (ProgressReporter's details, from the
 * workflow's description), by stage name. Heartbeats never enter a history, so this costs the run nothing.
 */
export async function heartbeatProgress(client: Client, workflowId: string): Promise<Map<string, StageProgress>> {
  const description = await client.workflow.getHandle(workflowId).describe();
  const found = new Map<string, StageProgress>();
  for (const activity of description.raw.pendingActivities ?? []) {
    const payload = activity.heartbeatDetails?.payloads?.[0];
    if (!payload) continue;
    let details: unknown;
    try {
      details = defaultPayloadConverter.fromPayload(payload);
    } catch {
      continue; // details in a form this client cannot read: no progress to show
    }
    const parsed = StageProgressSchema.safeParse(details);
    if (parsed.success && !found.has(parsed.data.stage)) found.set(parsed.data.stage, parsed.data);
  }
  return found;
}

/**
 * A workflow's `progress` answer, with each running stage that the workflow has no count for yet filled in
 * from its activity's heartbeats (e.g. judge calls done of the judge stage).
 */
export async function liveProgress(client: Client, workflowId: string): Promise<WorkflowProgress> {
  const progress = await client.workflow.getHandle(workflowId).query<WorkflowProgress>('progress');
  const running = Object.values(progress.stages).some((s) => s.status === 'running' && s.progress === null);
  if (!running) return progress;
  const beats = await heartbeatProgress(client, workflowId).catch(() => new Map<string, StageProgress>());
  for (const [name, stage] of Object.entries(progress.stages)) {
    const beat = beats.get(name);
    if (beat && stage.status === 'running' && stage.progress === null) stage.progress = beat;
  }
  return progress;
}
