import { createHash } from 'node:crypto';
import path from 'node:path';
import { stageLayout } from '../paths/stage-layout';

/** Where the downstream stage writes, under `<runDir>/downstream/`. */
export const downstreamPaths = (runDir: string) =>
  stageLayout(runDir, 'downstream', {
    plans: 'plans',
    records: 'runs',
    checkouts: 'checkouts',
    locks: 'locks',
    swebench: 'swebench',
    runsParquet: 'runs.parquet',
    tableJson: 'table.json',
    reportMarkdown: 'report.md',
    reportHtml: 'report.html',
  });

/** A configuration or instance name as one path segment: readable, and distinct names never collide. */
export function fileSafe(name: string): string {
  const clean = name
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[-.]+/, '')
    .slice(0, 80);
  if (clean === name) return clean;
  return `${clean || 'x'}-${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
}

/** `<records>/<configuration>/<instance>.json`: one (configuration, instance) run's record. */
export function recordPathFor(runDir: string, configuration: string, instanceId: string): string {
  return path.join(downstreamPaths(runDir).records, fileSafe(configuration), `${fileSafe(instanceId)}.json`);
}

/** The lock that lets one attempt of a pair run at a time. */
export function lockPathFor(runDir: string, configuration: string, instanceId: string): string {
  return path.join(downstreamPaths(runDir).locks, fileSafe(configuration), `${fileSafe(instanceId)}.lock`);
}

/** The pair's own checkout folder (its agent's and harness's worktrees live under it). */
export function checkoutDirFor(runDir: string, configuration: string, instanceId: string): string {
  return path.join(downstreamPaths(runDir).checkouts, fileSafe(configuration), fileSafe(instanceId));
}

/** The full conversation of a run, beside its record (`<record>.trajectory.json`). */
export function trajectoryPathFor(recordPath: string): string {
  return recordPath.replace(/\.json$/, '.trajectory.json');
}
