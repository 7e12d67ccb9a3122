// A Temporal server binary (not the CLI's dev server) on a SQLite file: standalone activities
// (DOSSIER_LAUNCH_DISPATCH=standalone) need a 1.31+ server, newer than the CLI dossier builds
// (STANDALONE_SERVER_VERSION). SQLite in WAL mode with synchronous=normal and one history shard, as
// the dev server dossier runs on; the cluster's dynamic config (deploy/temporal/dynamicconfig.yaml:
// what dossier gives the dev server, and what the CLI gives it of its own). The floor bench asks for
// one partition per task queue (Temporal's default is four): its figures in docs/benchmarks.md were
// taken so. For the bench and the tests of that dispatch; `npm start` runs the CLI's dev server.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildWithGo, cachedTool } from './goTools.ts';
import {
  configHead,
  DYNAMIC_CONFIG_FILE,
  dynamicConfigText,
  dynamicConfigValues,
  serviceLayout,
  serverPorts,
  TEMPORAL_SERVER,
} from './temporalServer.ts';
import { startOwned } from './owned.ts';
import { connectWhenReady } from '../temporal/setup.ts';

/** The first server version with standalone activities that builds with this machine's Go. */
export const STANDALONE_SERVER_VERSION = 'v1.32.1';

/** A Temporal server of `version` (by default the standalone-capable one): cached, or built with Go once (about 5 minutes). */
export async function resolveServerVersion(
  version: string = STANDALONE_SERVER_VERSION,
  log?: (line: string) => void,
): Promise<string> {
  return (
    cachedTool(TEMPORAL_SERVER, [version]) ??
    (await buildWithGo(TEMPORAL_SERVER, version, log ? { log } : {}))
  );
}

export interface SqliteServer {
  address: string;
  pid: number | undefined;
  stop: () => Promise<void>;
}

/** `dynamicConfig`: `key=value` pairs over the cluster's file; `partitions`: per task queue (default 4). */
export async function startServerBinary(
  binary: string,
  dir: string,
  dynamicConfig: string[] = [],
  partitions?: number,
): Promise<SqliteServer> {
  const host = '127.0.0.1';
  const ports = serverPorts(20_000 + Math.floor(Math.random() * 10_000));
  const store = (file: string) => [
    '      sql:',
    '        pluginName: sqlite',
    `        databaseName: ${JSON.stringify(file)}`,
    '        connectAddr: localhost',
    '        connectProtocol: tcp',
    '        connectAttributes:',
    '          cache: private',
    '          setup: true',
    '          journal_mode: wal',
    '          synchronous: 1',
    '        maxConns: 1',
    '        maxIdleConns: 1',
    '        maxConnLifetime: 1h',
  ];
  mkdirSync(path.join(dir, 'config'), { recursive: true });
  const dynamic = path.join(dir, 'dynamic.yaml');
  // A YAML key may appear once: a value given in `dynamicConfig` replaces the file's.
  const values = dynamicConfigValues(readFileSync(DYNAMIC_CONFIG_FILE, 'utf8'));
  if (partitions) {
    values.set('matching.numTaskqueueReadPartitions', [String(partitions)]);
    values.set('matching.numTaskqueueWritePartitions', [String(partitions)]);
  }
  for (const kv of dynamicConfig) {
    const at = kv.indexOf('=');
    if (at < 1) throw new Error(`dynamic config ${JSON.stringify(kv)} is not key=value`);
    values.set(kv.slice(0, at), [kv.slice(at + 1)]);
  }
  writeFileSync(dynamic, dynamicConfigText(values));
  writeFileSync(
    path.join(dir, 'config', 'bench.yaml'),
    [
      ...configHead(host, 1, store(path.join(dir, 'temporal.db')), store(path.join(dir, 'visibility.db'))),
      ...serviceLayout(host, ports, dynamic),
      '',
    ].join('\n'),
  );
  const proc = await startOwned({
    name: `The Temporal server ${binary}`,
    command: binary,
    args: ['--root', dir, '--config', 'config', '--env', 'bench', '--allow-no-auth', 'start'],
    logFile: path.join(dir, 'server.log'),
    hint: `see ${path.join(dir, 'server.log')}`,
    // The frontend's port opens before it answers ("Frontend is not healthy yet"): ready once it does.
    ready: async () => (await connectWhenReady(`${host}:${ports.frontend}`, 60_000)).close(),
  });
  return { address: `${host}:${ports.frontend}`, pid: proc.pid, stop: () => proc.stop() };
}
