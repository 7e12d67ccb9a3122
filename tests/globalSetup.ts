// Starts one real Temporal dev server (the provisioned CLI, not a download) for
// the whole test run, one PostgreSQL cluster (Debian's binaries) for the
// store suites and the process cluster, bundles the workflow code once, and
// makes sure the real Temporal server is built (the cluster test runs it).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startDevServer, type DevServer } from '../src/dev/devServer.ts';
import { resolveTemporalCli } from '../src/dev/temporalCli.ts';
import { resolveUiServer } from '../src/dev/uiServer.ts';
import { resolveTemporalServer } from '../src/dev/temporalServer.ts';
import { resolveServerVersion, startServerBinary, type SqliteServer } from '../src/dev/sqliteServer.ts';
import { provisionProvider } from '../src/analysis/venv.ts';
import { flashUnpackers } from '../src/python/flash.ts';
import { rulesEnv } from '../src/python/rules.ts';
import { unblobEnv } from '../src/python/unblob.ts';
import { workflowBundle } from '../src/worker.ts';
import { freePort } from './helpers/ports.ts';
import { startPostgres, type Postgres } from './helpers/postgres.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    uiUrl: string;
    temporalCli: string;
    uiServer: string;
    bundleCacheDir: string;
    postgresUrl: string;
    /** A Temporal server with standalone activities (DOSSIER_LAUNCH_DISPATCH=standalone). */
    standaloneServer: string;
  }
}

let server: DevServer | undefined;
let postgres: Postgres | undefined;
let standalone: SqliteServer | undefined;
let dir: string | undefined;

export async function setup(project: TestProject) {
  const cli = await resolveTemporalCli({
    configured: process.env.DOSSIER_TEMPORAL_CLI,
    log: (line) => console.error(line),
  });
  if (cli.kind !== 'path')
    throw new Error('the tests need a Temporal CLI binary (run `npm run provision:temporal`)');
  dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-tests-'));
  const bundleCacheDir = path.join(dir, 'bundles');
  const [started, pgStarted] = await Promise.all([
    startDevServer({
      cli,
      dbFile: path.join(dir, 'temporal.db'),
      port: await freePort(),
      uiPort: await freePort(),
      namespace: 'dossier',
      logFile: path.join(dir, 'temporal.log'),
    }),
    startPostgres(await freePort()),
    workflowBundle(bundleCacheDir),
  ]);
  server = started;
  postgres = pgStarted;
  project.provide('postgresUrl', postgres.url);
  project.provide('temporalAddress', server.address);
  // The server the standalone dispatch needs (1.31+; built with Go, about 5 minutes, once, then cached).
  const standaloneServer = await resolveServerVersion(undefined, (line) => console.error(line));
  project.provide('standaloneServer', standaloneServer);
  // The launch suite under standalone dispatch (DOSSIER_LAUNCH_DISPATCH=standalone npm test -- …)
  // needs a server that has standalone activities: the shared stacks' Temporal is that one then.
  if (process.env.DOSSIER_LAUNCH_DISPATCH === 'standalone') {
    standalone = await startServerBinary(standaloneServer, path.join(dir, 'standalone'));
    project.provide('temporalAddress', standalone.address);
  }
  project.provide('uiUrl', server.uiUrl);
  project.provide('temporalCli', cli.path);
  project.provide('uiServer', await resolveUiServer(process.env.DOSSIER_TEMPORAL_UI_SERVER));
  // The angr provider, so analysis tests measure analyses, not a first install.
  await provisionProvider(process.env.DOSSIER_ANALYSIS_PYTHON ?? '/usr/bin/python3');
  // And the flash unpackers, so the first JFFS2 or UBI extraction measures the extraction.
  await flashUnpackers(process.env.DOSSIER_ANALYSIS_PYTHON ?? '/usr/bin/python3');
  // And unblob, the breadth reader (about twenty seconds, once).
  await unblobEnv(process.env.DOSSIER_ANALYSIS_PYTHON ?? '/usr/bin/python3');
  await rulesEnv(process.env.DOSSIER_ANALYSIS_PYTHON ?? '/usr/bin/python3');
  // Built once with Go (about 10 minutes on a fresh machine), then cached.
  await resolveTemporalServer(process.env.DOSSIER_TEMPORAL_SERVER_BIN);
  project.provide('bundleCacheDir', bundleCacheDir);
}

export async function teardown() {
  await server?.stop();
  await standalone?.stop();
  await postgres?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}
