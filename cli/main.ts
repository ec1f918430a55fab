/**
 * `codegrep`: server | worker | run <config> | learn-demo | status <runId> | report <runId> | schedule …
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError } from '../schemas/config';
import { temporalConfig } from '../temporal.config';
import { startDevServer, stopDevServer } from './dev-server';
import { learnDemoCommand } from './learn-demo';
import { runCommand } from './run';
import { statusCommand } from './status';

const usage = `codegrep — CATM label mining, RL retrieval environment and evaluation on Temporal

Usage:
  codegrep server [start|stop] [--data-dir runs] [--port 7233] [--ui-port 8233]
      Start (in the background) or stop the embedded Temporal dev server (SQLite state in <data-dir>/temporal.db).
  codegrep worker
      Run the CPU worker (task queue ${temporalConfig.taskQueues.cpu}) until Ctrl-C.
  codegrep run <config.yaml|json> [--run-id ID] [--mirrors DIR] [--no-embedded] [--no-worker] [--detach]
      Start the pipeline on a config, draw progress bars, print the summary. Starts the embedded server and an
      in-process worker when none is running. --mirrors DIR reads repositories from local bare mirrors
      <owner>__<name>.git (environment.repoSource: { kind: mirror-dir, dir: DIR }) instead of the network.
  codegrep learn-demo [--task-dir runs/learn-task] [--run-id demo-learn] [--data-dir runs]
      The demo's training on a task a tiny model can learn on this CPU (generated "component repos"): RFT from a
      grep teacher, then GRPO, then held-out retrieval of BM25, the untrained start and the trained checkpoint.
  codegrep status <runId>
      Show a run's state, its stages and the Web UI link.
  codegrep report <runId> [--data-dir runs] [--html] [--list]
      Print the run's newest evaluation report (Markdown); --html prints the self-contained HTML report's path.
  codegrep schedule create <name> --config <file> --cron "0 3 * * *" [--catchup-window 1h] [--paused] [--note text]
  codegrep schedule list | pause <name> [--note text] | unpause <name> | trigger <name> | delete <name>
      Scheduled evaluation reruns (Temporal Schedules): each run re-evaluates the same config and keeps its report.
  codegrep mirrors build --instances FILE --out DIR [--source-dir DIR | --url-template URL]
      Write compact bare mirrors (exactly the instances' base commits, under refs/commits/<sha>) for offline use
      as environment.repoSource: { kind: mirror-dir, dir: DIR }; from GitHub, or from local clones in --source-dir.
  codegrep worktrees prune [--data-dir runs] [--older-than-days N] [--keep owner/name@sha …]
      Remove materialized worktrees (all, or those unused for N days) and prune git's worktree lists.
  codegrep training pause|resume|stop|status <runId>
  codegrep training budget <runId> --steps N
      Steer a training run (<runId>/training): pause / stop let the trainer checkpoint first; budget changes the
      step budget (refused below the current step). The GPU worker runs with \`npm run worker:gpu\`.
  codegrep training checkpoints <runId> [--data-dir runs]
      The run's checkpoints with their adapter sha256 and validation figures; (best) marks what checkpoint: best serves.

Environment: CODEGREP_TEMPORAL_ADDRESS (${temporalConfig.address}), CODEGREP_NAMESPACE (${temporalConfig.namespace}),
  CODEGREP_TEMPORAL_TLS, CODEGREP_TEMPORAL_SERVER_NAME, CODEGREP_TEMPORAL_TLS_CA, CODEGREP_TEMPORAL_TLS_CERT, CODEGREP_TEMPORAL_TLS_KEY,
  CODEGREP_TEMPORAL_API_KEY (a secured cluster: README "Deployment"),
  CODEGREP_UI_PORT (${temporalConfig.uiPort}), CODEGREP_LLM_API_KEY, and the timeout variables in temporal.config.ts.`;

/** A sub-command: its arguments after the command's name, the process's exit code. */
type SubCommand = (args: string[]) => Promise<number>;

/** The `--data-dir` option of the sub-commands that read or write a run's folder. */
const dataDirOption = { 'data-dir': { type: 'string', default: 'runs' } } as const;

async function serverCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...dataDirOption, port: { type: 'string' }, 'ui-port': { type: 'string' } },
  });
  const action = positionals[0] ?? 'start';
  const dataDir = path.resolve(values['data-dir']);
  if (action === 'stop') {
    const stopped = await stopDevServer(dataDir);
    console.log(stopped ? 'codegrep: Temporal dev server stopped' : `codegrep: no server pid file in ${dataDir}`);
    return 0;
  }
  if (action !== 'start') throw new ConfigError(`unknown server action "${action}" (start or stop)`);
  const server = await startDevServer({
    dataDir,
    port: values.port ? Number(values.port) : undefined,
    uiPort: values['ui-port'] ? Number(values['ui-port']) : undefined,
  });
  console.log(
    server.startedHere
      ? `codegrep: Temporal dev server at ${server.address}, namespace ${temporalConfig.namespace}, Web UI ${server.uiUrl}, state ${path.join(dataDir, 'temporal.db')}, log ${server.logFile}`
      : `codegrep: a Temporal server already answers at ${server.address}`,
  );
  return 0;
}

async function workerCommand(): Promise<number> {
  const { createCpuWorker } = await import('../workers/cpu');
  const { worker, close } = await createCpuWorker();
  console.log(`codegrep worker: task queue ${temporalConfig.taskQueues.cpu} on ${temporalConfig.address} (Ctrl-C to stop)`);
  try {
    await worker.run();
  } finally {
    await close();
  }
  return 0;
}

async function runSubCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      'run-id': { type: 'string' },
      mirrors: { type: 'string' },
      'no-embedded': { type: 'boolean', default: false },
      'no-worker': { type: 'boolean', default: false },
      detach: { type: 'boolean', default: false },
    },
  });
  const configFile = positionals[0];
  if (!configFile) throw new ConfigError('codegrep run needs a config file: codegrep run <config.yaml>');
  return runCommand({
    configFile,
    runId: values['run-id'],
    mirrors: values.mirrors,
    embedded: !values['no-embedded'],
    worker: !values['no-worker'],
    detach: values.detach,
  });
}

async function learnDemoSubCommand(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { 'task-dir': { type: 'string' }, 'run-id': { type: 'string' }, 'data-dir': { type: 'string' } },
  });
  return learnDemoCommand({ taskDir: values['task-dir'], runId: values['run-id'], dataDir: values['data-dir'] });
}

async function worktreesCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...dataDirOption, 'older-than-days': { type: 'string' }, keep: { type: 'string', multiple: true } },
  });
  if (positionals[0] !== 'prune')
    throw new ConfigError('usage: codegrep worktrees prune [--data-dir runs] [--older-than-days N] [--keep owner/name@sha …]');
  const { pruneWorktrees } = await import('../lib/worktrees');
  const dataDir = path.resolve(values['data-dir']);
  const days = values['older-than-days'] === undefined ? undefined : Number(values['older-than-days']);
  if (days !== undefined && !(days >= 0))
    throw new ConfigError(`--older-than-days must be a non-negative number, got ${values['older-than-days']}`);
  const result = await pruneWorktrees({
    cacheDir: path.join(dataDir, 'repos'),
    worktreesDir: path.join(dataDir, 'worktrees'),
    olderThanMs: days === undefined ? undefined : days * 24 * 3600_000,
    keep: values.keep ? new Set(values.keep) : undefined,
  });
  console.log(
    `codegrep: removed ${result.removed.length} worktrees, kept ${result.kept}${result.failed.length ? `, ${result.failed.length} could not be removed` : ''}`,
  );
  for (const failure of result.failed) console.log(`  ${JSON.stringify(failure)}`);
  return result.failed.length > 0 ? 1 : 0;
}

async function reportSubCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...dataDirOption, html: { type: 'boolean', default: false }, list: { type: 'boolean', default: false } },
  });
  if (!positionals[0]) throw new ConfigError('codegrep report needs a run id: codegrep report <runId> [--data-dir runs]');
  const { reportCommand } = await import('./report');
  return reportCommand({ runId: positionals[0], dataDir: values['data-dir'], html: values.html, list: values.list });
}

async function trainingSubCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { steps: { type: 'string' }, ...dataDirOption },
  });
  if (positionals[0] === 'checkpoints') {
    const { trainingCheckpointsCommand } = await import('./training-checkpoints');
    return trainingCheckpointsCommand(positionals[1], values['data-dir']);
  }
  const { trainingCommand } = await import('./training');
  return trainingCommand(positionals[0] ?? 'status', positionals[1], { steps: values.steps });
}

async function statusSubCommand(args: string[]): Promise<number> {
  const runId = args[0];
  if (!runId) throw new ConfigError('codegrep status needs a run id: codegrep status <runId>');
  return statusCommand(runId);
}

/** mirrors and schedule load their modules only when called, as worktrees, report and training load theirs. */
const subCommands = new Map<string, SubCommand>([
  ['server', serverCommand],
  ['worker', workerCommand],
  ['run', runSubCommand],
  ['learn-demo', learnDemoSubCommand],
  ['worktrees', worktreesCommand],
  ['mirrors', async (args) => (await import('./mirrors')).mirrorsCommand(args)],
  ['schedule', async (args) => (await import('./schedule')).scheduleCommand(args)],
  ['report', reportSubCommand],
  ['training', trainingSubCommand],
  ['status', statusSubCommand],
]);

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    console.log(usage);
    return command === undefined ? 2 : 0;
  }
  const subCommand = subCommands.get(command);
  if (!subCommand) {
    console.error(`codegrep: unknown command "${command}"\n\n${usage}`);
    return 2;
  }
  return subCommand(rest);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof ConfigError) console.error(`codegrep: ${error.message}`);
    else if (error instanceof Error && /^Temporal\w*Error$/.test(error.name)) console.error(`codegrep: ${error.name}: ${error.message}`);
    else console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(1);
  },
);
