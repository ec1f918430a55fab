import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = path.dirname(fileURLToPath(import.meta.url));

// In a child process: the guard replaces Node's crash-on-uncaught, which the test runner's own handlers would mask.
const script = `
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { guardWorkerProcess } from './process-guard.ts';
import { trackRunningActivities } from './running-activities.ts';
Runtime.install({ logger: new DefaultLogger('INFO', (e) => console.log('LOG', e.level, e.message, JSON.stringify(e.meta))) });
guardWorkerProcess();
const info = { activityType: 'trainSegment', activityId: '7', attempt: 3, workflowExecution: { workflowId: 'run/training', runId: 'r' }, workflowType: 'training', taskQueue: 'codegrep-gpu' };
const inbound = trackRunningActivities({ info }).inbound;
const activity = inbound.execute({ args: [], headers: {} }, () => new Promise((resolve) => {
  setTimeout(() => { throw new Error('thrown from a timer'); }, 10);
  setTimeout(() => void Promise.reject(new Error('a promise nobody awaited')), 20);
  setTimeout(() => resolve('done'), 60);
}));
console.log('RESULT', await activity);
setTimeout(() => { throw new Error('after the activity'); }, 10);
setTimeout(() => console.log('STILL RUNNING'), 50);
`;

describe('guardWorkerProcess', () => {
  it('logs an uncaught exception and an unhandled rejection with the running activity, and the process lives on', () => {
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: here, encoding: 'utf8' });
    const lines = out.split('\n');
    const logged = lines.filter((l) => l.startsWith('LOG ERROR'));
    expect(logged).toHaveLength(3);
    expect(logged[0]).toContain('uncaught exception while running trainSegment 7 (workflow run/training, attempt 3)');
    expect(logged[0]).toContain('thrown from a timer');
    expect(logged[1]).toContain('unhandled rejection while running trainSegment 7 (workflow run/training, attempt 3)');
    expect(logged[1]).toContain('a promise nobody awaited');
    expect(logged[2]).toContain('uncaught exception with no activity running');
    expect(lines).toContain('RESULT done');
    expect(lines.at(-2)).toBe('STILL RUNNING');
  });
});
