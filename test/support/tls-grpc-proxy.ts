import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

/**
 * A real TLS-terminating gRPC reverse proxy in front of the (plaintext) Temporal dev server, the way a
 * self-hosted cluster sits behind an ingress or Temporal Cloud behind its front door: HTTP/2 over TLS on a free
 * port, every stream forwarded to the dev server with its headers, body and trailers.
 *
 * - `clientCa`: mTLS. The TLS handshake requires a client certificate signed by this CA; others are refused
 *   by TLS itself, before any request.
 * - `apiKey`: each request must carry `authorization: Bearer <apiKey>`; one without it gets gRPC status 16
 *   UNAUTHENTICATED, as Temporal Cloud answers. `authorizations` records what each request carried.
 */
export interface TlsGrpcProxyOptions {
  upstream: string;
  cert: string;
  key: string;
  clientCa?: string;
  apiKey?: string;
}

export interface TlsGrpcProxy {
  address: string;
  port: number;
  /** The `authorization` header of every request seen (undefined when absent). */
  authorizations: (string | undefined)[];
  /** TLS handshakes that failed (e.g. no or a wrong client certificate). */
  tlsErrors: string[];
  close(): Promise<void>;
}

const HOP_HEADERS = new Set([':scheme', ':authority', 'connection', 'keep-alive', 'transfer-encoding', 'upgrade']);

export async function startTlsGrpcProxy(options: TlsGrpcProxyOptions): Promise<TlsGrpcProxy> {
  const server = http2.createSecureServer({
    cert: readFileSync(options.cert),
    key: readFileSync(options.key),
    ...(options.clientCa ? { ca: readFileSync(options.clientCa), requestCert: true, rejectUnauthorized: true } : {}),
  });
  const authorizations: (string | undefined)[] = [];
  const tlsErrors: string[] = [];
  let upstream: http2.ClientHttp2Session | null = null;
  const upstreamSession = () => {
    if (!upstream || upstream.closed || upstream.destroyed) {
      upstream = http2.connect(`http://${options.upstream}`);
      upstream.on('error', () => undefined); // each stream reports its own failure
    }
    return upstream;
  };
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('tlsClientError', (error) => tlsErrors.push(error.message));

  server.on('stream', (stream, headers) => {
    const authorization = headers.authorization as string | undefined;
    authorizations.push(authorization);
    if (options.apiKey !== undefined && authorization !== `Bearer ${options.apiKey}`) {
      stream.respond(
        {
          ':status': 200,
          'content-type': 'application/grpc',
          'grpc-status': '16',
          'grpc-message': 'Request unauthorized: invalid API key',
        },
        { endStream: true },
      );
      return;
    }
    const forward: http2.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(headers)) if (!HOP_HEADERS.has(name) && value !== undefined) forward[name] = value;
    let out: http2.ClientHttp2Stream;
    try {
      out = upstreamSession().request(forward);
    } catch {
      stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    let trailers: http2.IncomingHttpHeaders = {};
    out.on('response', (responseHeaders) => {
      if (stream.destroyed) return;
      const clean: http2.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(responseHeaders)) if (!HOP_HEADERS.has(name) && value !== undefined) clean[name] = value;
      // A trailers-only response (an immediate gRPC error) ends with its headers.
      if (responseHeaders['grpc-status'] !== undefined) stream.respond(clean, { endStream: true });
      else stream.respond(clean, { waitForTrailers: true });
    });
    out.on('trailers', (t) => (trailers = t));
    stream.on('wantTrailers', () => {
      const clean: http2.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(trailers)) if (!name.startsWith(':') && value !== undefined) clean[name] = value;
      stream.sendTrailers(clean);
    });
    out.on('data', (chunk: Buffer) => {
      if (!stream.destroyed && stream.headersSent && !stream.writableEnded) stream.write(chunk);
    });
    out.on('end', () => {
      if (!stream.destroyed && stream.headersSent && !stream.writableEnded) stream.end();
    });
    out.on('error', () => {
      if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
    stream.pipe(out);
    stream.on('close', () => {
      if (!out.destroyed) out.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.on('error', () => undefined);
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    address: `127.0.0.1:${port}`,
    port,
    authorizations,
    tlsErrors,
    close: async () => {
      for (const session of sessions) session.destroy();
      (upstream as http2.ClientHttp2Session | null)?.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
