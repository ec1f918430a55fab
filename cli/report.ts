/**
 * `codegrep report <runId>`: prints a run's evaluation report (the newest one: scheduled runs keep one per
 * execution under `evaluation/<start time>/`) and where its self-contained HTML version is.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../schemas/config';

export interface EvaluationReportFiles {
  /** The execution's folder label (`20250102T030000Z`), or null for `evaluation/` itself. */
  label: string | null;
  markdown: string;
  html: string;
  writtenAt: Date;
}

/** Every evaluation report of a run, oldest first. */
export function findEvaluationReports(runDir: string): EvaluationReportFiles[] {
  const root = path.join(runDir, 'evaluation');
  if (!existsSync(root)) return [];
  const candidates: { label: string | null; dir: string }[] = [{ label: null, dir: root }];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (entry.isDirectory() && entry.name !== 'shards') candidates.push({ label: entry.name, dir: path.join(root, entry.name) });
  }
  return candidates
    .filter((c) => existsSync(path.join(c.dir, 'report.md')))
    .map((c) => {
      const markdown = path.join(c.dir, 'report.md');
      return { label: c.label, markdown, html: path.join(c.dir, 'report.html'), writtenAt: statSync(markdown).mtime };
    })
    .sort((a, b) => a.writtenAt.getTime() - b.writtenAt.getTime());
}

export interface ReportOptions {
  runId: string;
  dataDir: string;
  /** Print only the HTML report's path (for `open "$(codegrep report RUN --html)"`). */
  html: boolean;
  /** List every report of the run instead of printing the newest. */
  list: boolean;
}

export function reportCommand(options: ReportOptions): number {
  const runDir = path.join(path.resolve(options.dataDir), options.runId);
  if (!existsSync(runDir))
    throw new ConfigError(`no run ${options.runId} in ${path.resolve(options.dataDir)} (pass --data-dir where its runs are)`);
  const reports = findEvaluationReports(runDir);
  if (reports.length === 0) {
    console.error(`codegrep: run ${options.runId} has no evaluation report yet (run the evaluation stage, or trigger its schedule)`);
    return 1;
  }
  if (options.list) {
    for (const r of reports) console.log(`${r.writtenAt.toISOString()}  ${r.label ?? '(latest unscheduled)'}  ${r.markdown}`);
    return 0;
  }
  const newest = reports[reports.length - 1]!;
  if (options.html) {
    console.log(newest.html);
    return 0;
  }
  process.stdout.write(readFileSync(newest.markdown, 'utf8'));
  console.log(
    `\n(report of ${newest.writtenAt.toISOString()}; HTML: ${newest.html}${reports.length > 1 ? `; ${reports.length - 1} older, see --list` : ''})`,
  );
  return 0;
}
