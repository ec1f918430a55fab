import type { Client } from '@temporalio/client';

/**
 * What activities get from the worker that runs them. Set once by workers/cpu.ts (and by tests that run
 * activities directly). Without a client, progress is still heartbeated but not signalled.
 */
let temporalClient: Client | null = null;

export function setActivityClient(client: Client | null): void {
  temporalClient = client;
}

export function activityClient(): Client | null {
  return temporalClient;
}
