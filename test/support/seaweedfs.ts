import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CreateBucketCommand, ListBucketsCommand, S3Client } from '@aws-sdk/client-s3';
import { portIsFree } from '../../cli/dev-server';
import { repoRoot } from './repo-root';

/**
 * A real S3-compatible server for the s3:// artifact-store tests: SeaweedFS (`weed server -s3`), the pinned
 * build from scripts/ensure-seaweedfs.sh, on free loopback ports with data in `dir` and one identity with the
 * given access key. Stop it with `stop()`.
 */
export interface SeaweedS3 {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Env vars pointing the AWS SDK at this server (for worker processes). */
  env: Record<string, string>;
  createBucket(name: string): Promise<void>;
  stop(): Promise<void>;
  log: string;
}

export function weedBinary(): string {
  return execFileSync('bash', [path.join(repoRoot, 'scripts/ensure-seaweedfs.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
}

/** Ports p with p + 10000 (the gRPC port SeaweedFS derives) also free. */
async function freePortPair(from: number, taken: Set<number>): Promise<number> {
  for (let port = from; port < from + 2000; port++) {
    if (taken.has(port) || taken.has(port + 10000)) continue;
    if ((await portIsFree(port)) && (await portIsFree(port + 10000))) {
      taken.add(port);
      taken.add(port + 10000);
      return port;
    }
  }
  throw new Error(`no free port pair in ${from}..${from + 2000}`);
}

export async function startSeaweedS3(
  dir: string,
  credentials = { accessKeyId: 'codegrep-test', secretAccessKey: 'codegrep-test-secret' },
): Promise<SeaweedS3> {
  const binary = weedBinary();
  mkdirSync(path.join(dir, 'data'), { recursive: true });
  const config = path.join(dir, 's3.json');
  writeFileSync(
    config,
    JSON.stringify({
      identities: [
        {
          name: 'codegrep',
          credentials: [{ accessKey: credentials.accessKeyId, secretKey: credentials.secretAccessKey }],
          actions: ['Admin', 'Read', 'Write', 'List', 'Tagging'],
        },
      ],
    }),
  );
  const taken = new Set<number>();
  const base = 20000 + Math.floor(Math.random() * 20000);
  const [master, volume, filer, s3] = [
    await freePortPair(base, taken),
    await freePortPair(base + 1, taken),
    await freePortPair(base + 2, taken),
    await freePortPair(base + 3, taken),
  ];
  const log = path.join(dir, 'weed.log');
  const logFd = openSync(log, 'a');
  const child: ChildProcess = spawn(
    binary,
    [
      'server',
      '-s3',
      '-ip=127.0.0.1',
      `-dir=${path.join(dir, 'data')}`,
      `-master.port=${master}`,
      `-volume.port=${volume}`,
      `-filer.port=${filer}`,
      `-s3.port=${s3}`,
      `-s3.config=${config}`,
      '-s3.port.iceberg=0',
      '-s3.port.lance=0',
      '-metricsPort=0',
      '-master.volumeSizeLimitMB=64',
      '-volume.max=20',
      `-filer.localSocket=${path.join(dir, 'filer.sock')}`,
    ],
    { detached: true, stdio: ['ignore', logFd, logFd], env: { ...process.env } },
  );
  closeSync(logFd);
  // stdout/stderr to a file: a pipe nobody drains would block the server.
  child.unref();
  const endpoint = `http://127.0.0.1:${s3}`;
  const client = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 });
  let exited: number | null = null;
  child.once('exit', (code) => (exited = code ?? -1));
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await client.send(new ListBucketsCommand({}));
      break;
    } catch {
      if (exited !== null)
        throw new Error(`weed exited with ${exited} before serving S3 (log ${log}):\n${readFileSync(log, 'utf8').slice(-3000)}`);
      if (Date.now() > deadline) {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
        throw new Error(`SeaweedFS S3 did not answer at ${endpoint} within 120 s`);
      }
      await new Promise((r) => setTimeout(r, 300));
    }
  }
  return {
    endpoint,
    ...credentials,
    env: {
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_REGION: 'us-east-1',
      AWS_S3_FORCE_PATH_STYLE: 'true',
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    },
    log,
    createBucket: async (name) => {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    stop: async () => {
      if (exited !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        return;
      }
      const timer = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
      }, 10_000);
      await gone;
      clearTimeout(timer);
    },
  };
}
