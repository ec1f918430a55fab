import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { temporalConfig } from '../temporal.config';
import type { WorkflowProgress } from '../schemas/progress';
import { liveProgress } from './live-progress';
import { connectClient } from '../workers/connection';

/** `codegrep status <runId>`: the pipeline's state, its stage table and the Web UI link. */
export async function statusCommand(runId: string): Promise<number> {
  const connection = await connectClient();
  try {
    const client = new Client({ connection, namespace: temporalConfig.namespace });
    const workflowId = runId.includes('/') ? runId : `${runId}/pipeline`;
    const handle = client.workflow.getHandle(workflowId);
    let description;
    try {
      description = await handle.describe();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        console.error(`codegrep: no workflow ${workflowId} in namespace ${temporalConfig.namespace}`);
        return 1;
      }
      throw error;
    }
    console.log(
      `${workflowId}: ${description.status.name} (started ${description.startTime.toISOString()}${description.closeTime ? `, closed ${description.closeTime.toISOString()}` : ''})`,
    );
    const printStages = (progress: WorkflowProgress, indent: string) => {
      for (const [name, stage] of Object.entries(progress.stages)) {
        const p = stage.progress;
        const amount = p ? ` ${p.done}${p.total !== null ? `/${p.total}` : ''} ${p.unit}` : '';
        console.log(`${indent}${name.padEnd(12)} ${stage.status}${amount}${stage.note ? ` — ${stage.note}` : ''}`);
      }
    };
    try {
      const progress = await handle.query<WorkflowProgress>('progress');
      printStages(progress, '  ');
      for (const [stage, childId] of Object.entries(progress.children)) {
        const child = await liveProgress(client, childId).catch(() => null);
        if (child) {
          console.log(`  ${stage} (${childId}):`);
          printStages(child, '    ');
        }
      }
    } catch {
      console.log('  (no worker answered the progress query; start one with `codegrep worker`)');
    }
    console.log(`  Web UI: ${temporalConfig.uiUrl}/namespaces/${temporalConfig.namespace}/workflows/${encodeURIComponent(workflowId)}`);
    return 0;
  } finally {
    await connection.close();
  }
}
