/**
 * `codegrep schedule …`: scheduled reruns of the retrieval-quality evaluation as Temporal Schedules.
 * A schedule starts the `evaluation` workflow with the config it was created from; each run writes its own
 * `evaluation/<start time>/` folder, so a model served under the same name at a new checkpoint is evaluated
 * afresh instead of being a cache hit.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  Client,
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type CalendarSpec,
  type CalendarSpecDescription,
  type Range,
  type ScheduleHandle,
} from '@temporalio/client';
import { resolveConfig, type ResolvedConfig } from '../lib/config';
import { ConfigError } from '../schemas/config';
import { activityTimeouts, temporalConfig } from '../temporal.config';
import { readConfigFile } from './config-file';
import { connectClient, probeTemporal, unreachableAdvice } from '../workers/connection';

const SCHEDULE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const USAGE = `codegrep schedule create <name> --config <file> (--cron "0 3 * * *" | --calendar '{"hour":3}') [--catchup-window 1h] [--paused] [--note text]
codegrep schedule list
codegrep schedule pause <name> [--note text]
codegrep schedule unpause <name> [--note text]
codegrep schedule trigger <name>
codegrep schedule delete <name>`;

/** Missed runs (server down at 03:00) are still taken within this window after it comes back. */
export const DEFAULT_CATCHUP_WINDOW = '1h';

export function checkScheduleName(name: string | undefined, usage: string = USAGE): string {
  if (!name) throw new ConfigError(`a schedule name is required:\n${usage}`);
  if (!SCHEDULE_NAME.test(name))
    throw new ConfigError(`schedule name "${name}": use letters, digits, ".", "_" and "-" (max 100), starting with a letter or digit`);
  return name;
}

/**
 * The config a schedule starts the evaluation with: read like `codegrep run` reads it (paths relative to the
 * config file, `dataDir` default `runs/`), evaluation paths resolved against the config file's folder too,
 * run id defaulting to the schedule's name, timeouts from temporal.config.ts, and `evaluation.outputPerRun`
 * set so every scheduled run predicts afresh and keeps its own report.
 */
export function prepareScheduledConfig(configFile: string, name: string): ResolvedConfig {
  const raw = readConfigFile(configFile);
  if (raw.runId === undefined) raw.runId = name;
  raw.temporal = { activityTimeouts };
  const evaluation = (typeof raw.evaluation === 'object' && raw.evaluation !== null ? raw.evaluation : {}) as Record<string, unknown>;
  raw.evaluation = { ...evaluation, outputPerRun: true };
  return resolveConfig(raw, configFile, path.dirname(path.resolve(configFile)));
}

export interface CreateScheduleOptions {
  name: string;
  config: ResolvedConfig;
  /** Cron lines (`0 3 * * *`), and/or calendar specs; at least one of the two. */
  cron?: string[];
  calendars?: CalendarSpec[];
  /** A duration string such as `1h`, `30m` (default DEFAULT_CATCHUP_WINDOW). */
  catchupWindow?: string;
  paused?: boolean;
  note?: string;
  taskQueue?: string;
}

/**
 * Creates the schedule: at each spec time it starts `evaluation` with the config on the CPU task queue.
 * Overlap SKIP (a run still going when the next is due makes the next one skip), pause on failure (a failing
 * evaluation pauses the schedule with the failure in its note instead of failing every night).
 */
export async function createEvaluationSchedule(client: Client, options: CreateScheduleOptions): Promise<ScheduleHandle> {
  const cron = options.cron ?? [];
  const calendars = options.calendars ?? [];
  if (cron.length === 0 && calendars.length === 0)
    throw new ConfigError('a schedule needs --cron "<min hour dom month dow>" or --calendar <json>');
  const config = options.config;
  const retrievers = config.evaluation.retrievers.map((r) => `${r.name} (${r.kind})`);
  try {
    return await client.schedule.create({
      scheduleId: options.name,
      spec: { ...(cron.length > 0 ? { cronExpressions: cron } : {}), ...(calendars.length > 0 ? { calendars } : {}) },
      action: {
        type: 'startWorkflow',
        workflowType: 'evaluation',
        taskQueue: options.taskQueue ?? temporalConfig.taskQueues.cpu,
        // The server appends the scheduled time to this id, one workflow per run.
        workflowId: `${config.runId}/evaluation`,
        args: [config],
        memo: { config: { runId: config.runId, recipe: config.recipe, schedule: options.name, retrievers } },
        searchAttributes: {
          [temporalConfig.searchAttributes.run]: [config.runId],
          [temporalConfig.searchAttributes.recipe]: [config.recipe],
          [temporalConfig.searchAttributes.stage]: ['starting'],
        },
      },
      policies: {
        overlap: ScheduleOverlapPolicy.SKIP,
        catchupWindow: options.catchupWindow ?? DEFAULT_CATCHUP_WINDOW,
        pauseOnFailure: true,
      },
      state: {
        paused: options.paused ?? false,
        ...(options.note ? { note: options.note } : {}),
      },
      memo: { codegrep: { runId: config.runId, retrievers } },
    });
  } catch (error) {
    if (error instanceof ScheduleAlreadyRunning)
      throw new ConfigError(`a schedule named "${options.name}" already exists (codegrep schedule delete ${options.name} first)`);
    throw error;
  }
}

export interface ScheduleRow {
  name: string;
  workflowType: string | null;
  paused: boolean;
  note: string | null;
  spec: string;
  nextRuns: Date[];
  recentRuns: { scheduledAt: Date; workflowId: string }[];
}

/** Every schedule of the namespace, by name. */
export async function listSchedules(client: Client): Promise<ScheduleRow[]> {
  const rows: ScheduleRow[] = [];
  for await (const summary of client.schedule.list()) {
    const spec = summary.spec;
    const described = [...(spec?.calendars ?? []).map(calendarText), ...(spec?.intervals ?? []).map((i) => `every ${String(i.every)}`)];
    rows.push({
      name: summary.scheduleId,
      workflowType: summary.action?.workflowType ?? null,
      paused: summary.state.paused,
      note: summary.state.note ?? null,
      spec: described.join('; ') || '(none)',
      nextRuns: summary.info.nextActionTimes,
      recentRuns: summary.info.recentActions.map((a) => ({ scheduledAt: a.scheduledAt, workflowId: a.action.workflow.workflowId })),
    });
  }
  return rows.sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** A calendar as the server keeps it (cron lines become calendars) in cron order, `*` for a whole range: `0 3 * * *`. */
function calendarText(calendar: CalendarSpecDescription): string {
  const field = (ranges: Range<number | string>[], whole: [number | string, number | string]) => {
    if (
      ranges.length === 0 ||
      (ranges.length === 1 && ranges[0]!.start === whole[0] && ranges[0]!.end === whole[1] && (ranges[0]!.step ?? 1) === 1)
    )
      return '*';
    return ranges.map((r) => `${r.start}${r.end !== r.start ? `-${r.end}` : ''}${r.step && r.step !== 1 ? `/${r.step}` : ''}`).join(',');
  };
  const text = [
    field(calendar.minute, [0, 59]),
    field(calendar.hour, [0, 23]),
    field(calendar.dayOfMonth, [1, 31]),
    field(calendar.month, ['JANUARY', 'DECEMBER']),
    field(calendar.dayOfWeek, ['SUNDAY', 'SATURDAY']),
  ].join(' ');
  const second = field(calendar.second, [0, 59]);
  return `${second === '0' ? '' : `second ${second}, `}${text}${calendar.comment ? ` (${calendar.comment})` : ''}`;
}

async function withHandle<T>(client: Client, name: string, act: (handle: ScheduleHandle) => Promise<T>): Promise<T> {
  try {
    return await act(client.schedule.getHandle(name));
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) throw new ConfigError(`no schedule named "${name}" (codegrep schedule list shows them)`);
    throw error;
  }
}

export const pauseSchedule = (client: Client, name: string, note?: string) =>
  withHandle(client, name, (h) => h.pause(note ?? 'paused with codegrep schedule pause'));
export const unpauseSchedule = (client: Client, name: string, note?: string) =>
  withHandle(client, name, (h) => h.unpause(note ?? 'unpaused with codegrep schedule unpause'));
/** Starts a run now, whether or not the schedule is paused (overlap SKIP: not while one is running). */
export const triggerSchedule = (client: Client, name: string) => withHandle(client, name, (h) => h.trigger(ScheduleOverlapPolicy.SKIP));
export const deleteSchedule = (client: Client, name: string) => withHandle(client, name, (h) => h.delete());

function formatRows(rows: ScheduleRow[]): string {
  if (rows.length === 0) return 'codegrep: no schedules';
  const when = (d: Date | undefined) => (d ? d.toISOString().replace(/\.\d+Z$/, 'Z') : '–');
  const lines = rows.map((r) => {
    const last = r.recentRuns[r.recentRuns.length - 1];
    return [
      r.name,
      r.paused ? 'paused' : 'active',
      r.workflowType ?? '?',
      r.spec,
      `next ${r.paused ? '– (paused)' : when(r.nextRuns[0])}`,
      `last ${last ? `${when(last.scheduledAt)} ${last.workflowId}` : '–'}`,
      r.note ? `note: ${r.note}` : '',
    ]
      .filter((c) => c !== '')
      .join('  ');
  });
  return lines.join('\n');
}

function parseScheduleArgs(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      cron: { type: 'string', multiple: true },
      calendar: { type: 'string', multiple: true },
      'catchup-window': { type: 'string' },
      paused: { type: 'boolean', default: false },
      note: { type: 'string' },
    },
  });
}

type ScheduleArgs = ReturnType<typeof parseScheduleArgs>['values'];

export async function scheduleCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseScheduleArgs(args);
  const [action, name] = positionals;
  if (!action) throw new ConfigError(`usage:\n${USAGE}`);
  if (!['create', 'list', 'pause', 'unpause', 'trigger', 'delete'].includes(action))
    throw new ConfigError(`unknown schedule action "${action}"; usage:\n${USAGE}`);
  // Everything that can be checked without the server is checked first.
  let create: CreateScheduleOptions | null = null;
  if (action === 'create') create = createOptions(name, values);
  else if (action !== 'list') checkScheduleName(name);
  const unreachable = await probeTemporal();
  if (unreachable) {
    console.error(unreachableAdvice(unreachable));
    return 2;
  }
  const connection = await connectClient();
  const client = new Client({ connection, namespace: temporalConfig.namespace });
  try {
    if (create) return await createCommand(client, create);
    return await scheduleAction(client, action, name, values.note);
  } finally {
    await connection.close();
  }
}

/** `codegrep schedule create`'s options, every one checked (the config resolved) before the server is asked. */
function createOptions(name: string | undefined, values: ScheduleArgs): CreateScheduleOptions {
  const scheduleName = checkScheduleName(name);
  if (!values.config) throw new ConfigError(`codegrep schedule create needs --config <file>\n${USAGE}`);
  const calendars = (values.calendar ?? []).map((text) => {
    try {
      return JSON.parse(text) as CalendarSpec;
    } catch (error) {
      throw new ConfigError(`--calendar ${text}: not JSON (${(error as Error).message}); e.g. '{"hour": 3, "minute": 0}'`);
    }
  });
  const cron = values.cron ?? [];
  if (cron.length === 0 && calendars.length === 0)
    throw new ConfigError(`a schedule needs --cron "<min hour dom month dow>" or --calendar <json>\n${USAGE}`);
  return {
    name: scheduleName,
    config: prepareScheduledConfig(values.config, scheduleName),
    cron,
    calendars,
    ...(values['catchup-window'] ? { catchupWindow: values['catchup-window'] } : {}),
    paused: values.paused,
    ...(values.note ? { note: values.note } : {}),
  };
}

async function createCommand(client: Client, create: CreateScheduleOptions): Promise<number> {
  const { name, config } = create;
  await createEvaluationSchedule(client, create);
  console.log(
    `codegrep: schedule ${name} created${create.paused ? ' (paused)' : ''}: evaluation of run ${config.runId} on task queue ${temporalConfig.taskQueues.cpu}, ` +
      `reports in ${path.join(config.runDir, 'evaluation')}/<start time>/\n  Web UI: ${temporalConfig.uiUrl}/namespaces/${temporalConfig.namespace}/schedules/${encodeURIComponent(name)}`,
  );
  return 0;
}

/** list, pause, unpause, trigger and delete. */
async function scheduleAction(client: Client, action: string, name: string | undefined, note: string | undefined): Promise<number> {
  switch (action) {
    case 'list':
      console.log(formatRows(await listSchedules(client)));
      return 0;
    case 'pause':
      await pauseSchedule(client, checkScheduleName(name), note);
      console.log(`codegrep: schedule ${name} paused`);
      return 0;
    case 'unpause':
      await unpauseSchedule(client, checkScheduleName(name), note);
      console.log(`codegrep: schedule ${name} unpaused`);
      return 0;
    case 'trigger':
      await triggerSchedule(client, checkScheduleName(name));
      console.log(`codegrep: schedule ${name} triggered (codegrep schedule list shows the run)`);
      return 0;
    case 'delete':
      await deleteSchedule(client, checkScheduleName(name));
      console.log(`codegrep: schedule ${name} deleted`);
      return 0;
    default:
      throw new Error(`unreachable: schedule action ${action}`);
  }
}
