import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EnvRequestError } from './protocol';
import type { TrainingEnvironment } from './environment';

export interface EnvServerOptions {
  /** Loopback by default: the trainer runs on the same node. */
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Largest request body accepted (a step of 512 episodes with 4096-token turns is a few MB). */
  maxBodyBytes?: number;
  /** Told about every request that failed on the server's side (status 500). */
  onInternalError?: (error: unknown, path: string) => void;
}

export interface EnvServer {
  /** Base URL for the trainer's `env_url`, e.g. `http://127.0.0.1:40123`. */
  url: string;
  port: number;
  close(): Promise<void>;
}

const ROUTES = {
  '/episodes/open': 'open',
  '/episodes/step': 'step',
  '/episodes/close': 'close',
} as const;

function reply(res: ServerResponse, status: number, body: unknown): void {
  const data = Buffer.from(JSON.stringify(body), 'utf8');
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': data.length });
  res.end(data);
}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new EnvRequestError(413, `request body is larger than ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * Serves a TrainingEnvironment over HTTP as trainer/ENV_PROTOCOL.md describes: POST with a JSON body to
 * /episodes/open, /episodes/step and /episodes/close; 200 with a JSON body on success; otherwise a 4xx
 * `{"error": "..."}` naming the field or episode (404 for an unknown episode or route), or 500 when the
 * server itself failed. node:http only; the trainer sends one request at a time, but nothing here relies on it.
 */
export async function startEnvServer(environment: TrainingEnvironment, options: EnvServerOptions = {}): Promise<EnvServer> {
  const maxBodyBytes = options.maxBodyBytes ?? 256 * 1024 * 1024;
  const server = createServer((req, res) => {
    void handle(req, res);
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    try {
      const route = ROUTES[path as keyof typeof ROUTES];
      if (!route) throw new EnvRequestError(404, `no route ${path} (routes: ${Object.keys(ROUTES).join(', ')})`);
      if (req.method !== 'POST') throw new EnvRequestError(405, `${path} takes POST, not ${req.method}`);
      const raw = await readBody(req, maxBodyBytes);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch (error) {
        throw new EnvRequestError(400, `${path}: the request body is not valid JSON: ${(error as Error).message}`);
      }
      const result =
        route === 'open' ? await environment.open(body) : route === 'step' ? await environment.step(body) : environment.close(body);
      reply(res, 200, result);
    } catch (error) {
      if (error instanceof EnvRequestError) {
        reply(res, error.status, { error: error.message });
        return;
      }
      options.onInternalError?.(error, path);
      reply(res, 500, { error: `${path}: ${error instanceof Error ? error.message : String(error)}` });
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
