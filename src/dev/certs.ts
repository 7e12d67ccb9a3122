// The certificates of a cluster's Temporal, made by `dossier cluster up` and by
// the compose file's `temporal-certs` service: a private CA, the server's
// certificate (the frontend, the internal services and the system worker all
// present it) and client certificates for dossier's gateways and workers and
// for the UI server. The frontend and the internal services require a client
// certificate signed by this CA, so nothing else reaches Temporal.
//
// The CA's key signs once and is thrown away: when anything is missing, no
// longer matches, or expires within 30 days, the whole set is made again
// (Temporal and every member restart with `cluster up` / `compose up` anyway).
// Keys are made by node:crypto; the certificates are signed by the `openssl`
// CLI (Debian's `openssl`, which node:crypto cannot replace: it signs no X.509).
import { execFile } from 'node:child_process';
import { createPrivateKey, generateKeyPairSync, randomBytes, X509Certificate } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { ConfigError } from '../config.ts';

const run = promisify(execFile);

/** The name the server's certificate carries and every client checks (whatever address it dials). */
export const TEMPORAL_SERVER_NAME = 'temporal';
const CA_DAYS = 3650;
const LEAF_DAYS = 825;
const RENEW_WITHIN_MS = 30 * 24 * 3_600_000;

/** Who holds a set: the server, dossier's gateways and workers, the UI server. */
export const CERT_PARTS = ['server', 'client', 'ui'] as const;
export type CertPart = (typeof CERT_PARTS)[number];

/** One part's files, each in the part's own folder: the CA's certificate, its certificate and key. */
export interface CertSet {
  ca: string;
  cert: string;
  key: string;
}

export interface TemporalCerts {
  sets: Record<CertPart, CertSet>;
  /** Made now (true) or found valid (false). */
  made: boolean;
}

export interface CertOptions {
  /** Addresses (IPs or DNS names) the server's certificate names besides `temporal`, `localhost` and 127.0.0.1. */
  hosts?: string[];
  /** uid:gid that owns a part's files (a container whose process runs as another user); default: this process. */
  owners?: Partial<Record<CertPart, { uid: number; gid: number }>>;
}

function setOf(dir: string, part: CertPart): CertSet {
  const folder = path.join(dir, part);
  return {
    ca: path.join(folder, 'ca.pem'),
    cert: path.join(folder, 'cert.pem'),
    key: path.join(folder, 'key.pem'),
  };
}

function sans(hosts: string[]): string[] {
  const all = new Set([TEMPORAL_SERVER_NAME, 'localhost', '127.0.0.1', ...hosts]);
  return [...all].map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`));
}

/** Why the set under `dir` must be made again, or undefined when it is whole, matching and not expiring. */
function staleness(dir: string, hosts: string[]): string | undefined {
  const sets = CERT_PARTS.map((part) => setOf(dir, part));
  const missing = sets.flatMap((s) => Object.values(s)).find((f) => !existsSync(f));
  if (missing) return `${missing} is missing`;
  const caPem = readFileSync(sets[0]!.ca, 'utf8');
  if (sets.some((s) => readFileSync(s.ca, 'utf8') !== caPem)) return 'the parts hold different CAs';
  const ca = new X509Certificate(caPem);
  const soon = Date.now() + RENEW_WITHIN_MS;
  if (Date.parse(ca.validTo) < soon) return 'the CA expires within 30 days';
  for (const [i, s] of sets.entries()) {
    const cert = new X509Certificate(readFileSync(s.cert));
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return `${s.cert} is not signed by the CA`;
    if (!cert.checkPrivateKey(createPrivateKey(readFileSync(s.key))))
      return `${s.key} is not ${s.cert}'s key`;
    if (Date.parse(cert.validTo) < soon) return `${s.cert} expires within 30 days`;
    if (CERT_PARTS[i] === 'server') {
      const named = (cert.subjectAltName ?? '').split(', ').map((n) => n.replace(/^IP Address:/, 'IP:'));
      const absent = sans(hosts).find((n) => !named.includes(n));
      if (absent) return `the server's certificate does not name ${absent}`;
    }
  }
  return undefined;
}

function keyPem(): string {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** An OpenSSL `req` configuration: no system openssl.cnf is read, so every machine makes the same certificates. */
function reqConfig(commonName: string, extensions: string[]): string {
  return [
    '[req]',
    'distinguished_name = dn',
    'prompt = no',
    'x509_extensions = ext',
    '[dn]',
    `CN = ${commonName}`,
    '[ext]',
    ...extensions,
    '',
  ].join('\n');
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args, { timeout: 60_000 });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT')
      throw new Error(
        "the `openssl` command is needed to sign the cluster's Temporal certificates: install Debian's openssl (scripts/system-packages.sh does)",
      );
    throw new Error(`openssl ${args[0]} failed: ${(e.stderr || e.message).trim().slice(-1_000)}`);
  }
}

async function makeAll(
  dir: string,
  hosts: string[],
): Promise<Record<CertPart, { cert: string; key: string; ca: string }>> {
  const work = mkdtempSync(path.join(dir, '.making-'));
  try {
    const file = (name: string, text: string) => {
      writeFileSync(path.join(work, name), text, { mode: 0o600 });
      return path.join(work, name);
    };
    const caKey = file('ca.key', keyPem());
    const caCert = path.join(work, 'ca.pem');
    const tag = randomBytes(4).toString('hex');
    const caConf = file(
      'ca.cnf',
      reqConfig(`dossier Temporal CA ${tag}`, [
        'basicConstraints = critical,CA:TRUE,pathlen:0',
        'keyUsage = critical,keyCertSign,cRLSign',
        'subjectKeyIdentifier = hash',
      ]),
    );
    await openssl([
      'req',
      '-x509',
      '-new',
      '-key',
      caKey,
      '-config',
      caConf,
      '-days',
      String(CA_DAYS),
      '-sha256',
      '-out',
      caCert,
    ]);
    const leaf = async (part: CertPart) => {
      const key = keyPem();
      const usage = part === 'server' ? 'serverAuth,clientAuth' : 'clientAuth';
      const conf = file(
        `${part}.cnf`,
        reqConfig(part === 'server' ? TEMPORAL_SERVER_NAME : `dossier ${part}`, [
          'basicConstraints = critical,CA:FALSE',
          'keyUsage = critical,digitalSignature',
          `extendedKeyUsage = ${usage}`,
          ...(part === 'server' ? [`subjectAltName = ${sans(hosts).join(',')}`] : []),
          'authorityKeyIdentifier = keyid',
          'subjectKeyIdentifier = hash',
        ]),
      );
      const keyFile = file(`${part}.key`, key);
      const certFile = path.join(work, `${part}.pem`);
      await openssl([
        'req',
        '-x509',
        '-new',
        '-key',
        keyFile,
        '-CA',
        caCert,
        '-CAkey',
        caKey,
        '-config',
        conf,
        '-days',
        String(LEAF_DAYS),
        '-sha256',
        '-set_serial',
        `0x${randomBytes(16).toString('hex')}`,
        '-out',
        certFile,
      ]);
      return { cert: readFileSync(certFile, 'utf8'), key, ca: readFileSync(caCert, 'utf8') };
    };
    const made = {} as Record<CertPart, { cert: string; key: string; ca: string }>;
    for (const part of CERT_PARTS) made[part] = await leaf(part);
    return made;
  } finally {
    // The CA's key goes with the scratch folder: nothing can sign for this cluster again.
    rmSync(work, { recursive: true, force: true });
  }
}

/** Writes `text` to `file` through a temporary name, so a reader sees the old file or the new one. */
function replace(file: string, text: string, mode: number) {
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, text, { mode });
  chmodSync(temp, mode);
  renameSync(temp, file);
}

/** The certificates under `dir` (made, or made again, when needed), each part in its own folder. */
export async function ensureTemporalCerts(dir: string, opts: CertOptions = {}): Promise<TemporalCerts> {
  const hosts = opts.hosts ?? [];
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stale = staleness(dir, hosts);
  if (stale) {
    const made = await makeAll(dir, hosts);
    for (const part of CERT_PARTS) {
      const set = setOf(dir, part);
      mkdirSync(path.dirname(set.key), { recursive: true, mode: 0o700 });
      replace(set.key, made[part].key, 0o600);
      replace(set.cert, made[part].cert, 0o644);
      replace(set.ca, made[part].ca, 0o644);
    }
  }
  for (const part of CERT_PARTS) {
    const owner = opts.owners?.[part];
    const set = setOf(dir, part);
    chmodSync(path.dirname(set.key), 0o700);
    if (owner)
      for (const f of [path.dirname(set.key), ...Object.values(set)]) chownSync(f, owner.uid, owner.gid);
  }
  return {
    sets: Object.fromEntries(CERT_PARTS.map((p) => [p, setOf(dir, p)])) as Record<CertPart, CertSet>,
    made: Boolean(stale),
  };
}

/** `dossier temporal-certs DIR [--host H]… [--owner PART=UID:GID]…`: what the compose file runs once per `up`. */
export async function temporalCertsCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { host: { type: 'string', multiple: true }, owner: { type: 'string', multiple: true } },
  });
  const problems: string[] = [];
  if (positionals.length !== 1 || !positionals[0]!.startsWith('/'))
    problems.push('DIR: expected one absolute path, the folder that holds server/, client/ and ui/');
  const owners: CertOptions['owners'] = {};
  for (const spec of values.owner ?? []) {
    const m = /^(server|client|ui)=(\d+):(\d+)$/.exec(spec);
    if (m) owners[m[1] as CertPart] = { uid: Number(m[2]), gid: Number(m[3]) };
    else problems.push(`--owner ${spec}: expected PART=UID:GID, PART one of ${CERT_PARTS.join(', ')}`);
  }
  if (problems.length) throw new ConfigError(problems, 'Invalid arguments');
  const certs = await ensureTemporalCerts(positionals[0]!, { hosts: values.host, owners });
  console.log(
    certs.made
      ? `made the certificates under ${positionals[0]}`
      : `the certificates under ${positionals[0]} are valid`,
  );
}
