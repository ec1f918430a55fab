import path from 'node:path';
import { parseArgs } from 'node:util';
import { readRows } from '../lib/artifacts';
import { buildMirrors } from '../lib/worktrees/mirrors';
import { ConfigError } from '../schemas/config';
import { parseInstanceRecord } from '../schemas/instances';
import { DEFAULT_REPO_SOURCE, HEAD_COMMIT, type RepoSource, type WorktreeRequest } from '../schemas/worktrees';

const USAGE =
  'usage: codegrep mirrors build --instances FILE --out DIR [--source-dir DIR | --url-template URL]\n' +
  '  Writes compact bare mirrors <owner>__<name>.git holding exactly the base commits of the instances (each under\n' +
  '  refs/commits/<sha>), for environment.repoSource: { kind: mirror-dir, dir: DIR } on machines without network.\n' +
  '  Commits come from GitHub by default, or from local clones / mirrors in --source-dir (<owner>__<name>.git or <owner>/<name>.git).';

/** `codegrep mirrors build`: compact mirrors for air-gapped clusters (lib/worktrees/mirrors.ts). */
export async function mirrorsCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      instances: { type: 'string' },
      out: { type: 'string' },
      'source-dir': { type: 'string' },
      'url-template': { type: 'string' },
      'no-gc': { type: 'boolean', default: false },
    },
  });
  if (positionals[0] !== 'build' || !values.instances || !values.out) throw new ConfigError(USAGE);
  if (values['source-dir'] && values['url-template']) throw new ConfigError(`--source-dir and --url-template exclude each other\n${USAGE}`);
  const source: RepoSource = values['source-dir']
    ? { kind: 'mirror-dir', dir: path.resolve(values['source-dir']) }
    : values['url-template']
      ? { kind: 'url', template: values['url-template'] }
      : DEFAULT_REPO_SOURCE;

  const requests: WorktreeRequest[] = [];
  const instancesPath = path.resolve(values.instances);
  for await (const record of readRows(instancesPath)) {
    const parsed = parseInstanceRecord(record, `instances ${instancesPath}`);
    if (!parsed.ok) throw new ConfigError(parsed.message);
    // use_patch instances (CodeScout's SWE-Smith rows) need their repository's head, not a base commit.
    const commit = parsed.instance.use_patch === true ? HEAD_COMMIT : parsed.instance.base_commit!;
    requests.push({ repo: parsed.instance.repo, commit });
  }
  if (requests.length === 0) throw new ConfigError(`instances ${instancesPath} has no rows`);

  const outDir = path.resolve(values.out);
  console.log(
    `codegrep mirrors: ${requests.length} instances → ${outDir} (from ${source.kind === 'mirror-dir' ? source.dir : source.template})`,
  );
  let failed = 0;
  const results = await buildMirrors(requests, {
    outDir,
    source,
    skipGc: values['no-gc'],
    onRepo: (r) => {
      const counts = { fetched: 0, present: 0, failed: 0 };
      for (const c of r.commits) counts[c.status]++;
      failed += counts.failed;
      console.log(
        `  ${r.repo.padEnd(28)} ${counts.fetched} fetched, ${counts.present} present, ${counts.failed} failed  ${(r.bytes / 1024 / 1024).toFixed(1)} MiB  ${(r.ms / 1000).toFixed(1)} s  ${r.path}`,
      );
      for (const c of r.commits) if (c.error) console.log(`    ${c.commit}: ${c.error}`);
    },
  });
  const bytes = results.reduce((n, r) => n + r.bytes, 0);
  console.log(
    `codegrep mirrors: ${results.length} repositories, ${(bytes / 1024 / 1024).toFixed(1)} MiB${failed ? `, ${failed} commits failed` : ''}`,
  );
  return failed > 0 ? 1 : 0;
}
