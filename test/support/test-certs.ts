import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Real X.509 material made with the `openssl` command for TLS tests: a CA, a server certificate it signs (for
 * the names given), a client certificate it signs, and a second, unrelated CA ("wrong CA"). ECDSA P-256 keys:
 * quick to make, and accepted by both grpc-js (OpenSSL) and the worker's Rust core (rustls).
 */
export interface TestCerts {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A client certificate signed by the other CA: a server that trusts only `caCert` must refuse it. */
  strangerClientCert: string;
  strangerClientKey: string;
  otherCaCert: string;
}

export function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function makeCa(dir: string, name: string): { cert: string; key: string } {
  const key = path.join(dir, `${name}.key`);
  const cert = path.join(dir, `${name}.pem`);
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key], dir);
  openssl(
    [
      'req',
      '-x509',
      '-new',
      '-key',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  return { cert, key };
}

function makeLeaf(dir: string, name: string, ca: { cert: string; key: string }, extensions: string): { cert: string; key: string } {
  const key = path.join(dir, `${name}.key`);
  const csr = path.join(dir, `${name}.csr`);
  const cert = path.join(dir, `${name}.pem`);
  const ext = path.join(dir, `${name}.ext`);
  writeFileSync(ext, `basicConstraints=CA:FALSE\n${extensions}\n`);
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key], dir);
  // PKCS#8: the form every TLS stack reads.
  openssl(['pkcs8', '-topk8', '-nocrypt', '-in', key, '-out', `${key}.p8`], dir);
  execFileSync('mv', [`${key}.p8`, key]);
  openssl(['req', '-new', '-key', key, '-out', csr, '-subj', `/CN=${name}`], dir);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-CAcreateserial',
      '-out',
      cert,
      '-days',
      '2',
      '-sha256',
      '-extfile',
      ext,
    ],
    dir,
  );
  return { cert, key };
}

/** Makes the certificates in `dir`; the server certificate carries `serverNames` (DNS names) and 127.0.0.1. */
export function makeTestCerts(where: string, serverNames: string[] = ['temporal.test']): TestCerts {
  const dir = path.resolve(where);
  const ca = makeCa(dir, 'test-ca');
  const other = makeCa(dir, 'other-ca');
  const san = [...serverNames.map((n) => `DNS:${n}`), 'IP:127.0.0.1'].join(',');
  const server = makeLeaf(dir, 'server', ca, `subjectAltName=${san}\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth`);
  const client = makeLeaf(
    dir,
    'client',
    ca,
    'subjectAltName=DNS:codegrep-worker\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth',
  );
  const stranger = makeLeaf(
    dir,
    'stranger',
    other,
    'subjectAltName=DNS:stranger\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth',
  );
  return {
    dir,
    caCert: ca.cert,
    serverCert: server.cert,
    serverKey: server.key,
    clientCert: client.cert,
    clientKey: client.key,
    strangerClientCert: stranger.cert,
    strangerClientKey: stranger.key,
    otherCaCert: other.cert,
  };
}
