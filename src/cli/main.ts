// `dossier <command>`: start (the embedded stack), worker, gateway, token, provision-temporal.
// Each command loads only what it runs (a `call` never loads the worker or
// Temporal's native bridge), so the short commands start at once.
import { mkdirSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { PRODUCT } from '../domain/product.ts';
import type { StackParts } from '../dev/stack.ts';
import { writeDevJson, type DevJson } from '../dev/devJson.ts';
import { clientConfig, cliLine, recordStack } from './stacks.ts';

const USAGE = `usage: dossier <command>

  start                 run the embedded stack: Temporal dev server, worker, gateway (npm start)
  gateway               run only the gateway (needs DOSSIER_TEMPORAL_ADDRESS)
  worker                run only a worker for DOSSIER_WORKER_CAPABILITIES (needs DOSSIER_TEMPORAL_ADDRESS)
  cluster up [--gateways N] [--workers N] [--postgres URL] [--postgres-port P] [--separate-homes]
                        run the team cluster as processes: PostgreSQL, a real Temporal server on it,
                        the audit UI, N gateways (default 2) and N workers (default 3) on the
                        PostgreSQL store (--separate-homes: each its own DOSSIER_HOME, as on separate
                        hosts); connection details in DOSSIER_HOME/cluster.json
  token create --principal NAME --team TEAM [--role viewer|operator|admin] [--label TEXT]
               [--toolsets LIST]
                        make an API token (printed once; only its hash is kept); --label: a note
                        token list shows; --toolsets: what its connections list by default (e.g.
                        analysis,devices, or all)
  token list [--team TEAM] / token revoke ID
                        list tokens by id (never the token), or revoke one
  call TOOL ['{…}' | --json '{…}'] [--key K] [--wait-ms N]
                        call a tool and print its reply; follows a running launch or analysis to its
                        end; exits 1 unless it succeeded (failed, interrupted, cancelled, refused)
  launches [--status S] [--tool T] [--limit N]
                        a table of recent launches with status and UI link
  upload FILE [--name NAME]
                        upload a file as an artifact (POST /artifacts); prints its digest and record
  mcp --stdio           serve the tools over stdin/stdout as the principal of DOSSIER_TOKEN
  ui-guard --upstream HOST:PORT [--listen HOST:PORT] [--temporal-reads HOST:PORT] [--codec URL]
                        serve a Temporal UI server read-only to signed-in viewers (tokens of
                        DOSSIER_STORE), each seeing its own team's workflows (default listen
                        127.0.0.1:8233; start and cluster up run it themselves); with
                        --temporal-reads, also the UI server's way to DOSSIER_TEMPORAL_ADDRESS,
                        which passes its reads only, over DOSSIER_TEMPORAL_TLS_*; --codec names a
                        gateway's codec endpoint (http://gateway:7400/codec), which opens each
                        viewer's team's payloads (the UI server's codec endpoint: /codec)
  temporal-certs DIR [--host H]… [--owner PART=UID:GID]…
                        make (or keep, while valid) the certificates of a cluster's Temporal under
                        DIR/server, DIR/client and DIR/ui (the compose file's temporal-certs service)
  provision-temporal [--server]
                        find or build the Temporal CLI and the Temporal UI server (with --server also
                        the Temporal server and temporal-sql-tool for \`cluster up\`, and the newer
                        server DOSSIER_LAUNCH_DISPATCH=standalone needs); print their paths
  provision-analysis    make the angr provider's hash-locked virtualenv (cached); print angr's version
  provision-unpackers   make the unpackers' and rule engine's hash-locked virtualenvs (JFFS2, UBI; unblob; YARA-X)
  version               print the version and whether the compiled build or the sources run

Configuration: DOSSIER_* environment variables (see docs/operations.md).`;

async function main(argv: string[]) {
  const [command, ...rest] = argv;
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(USAGE);
    return;
  }
  switch (command) {
    case 'start':
      return runStack(loadConfig(), {}, true);
    case 'gateway':
      return runStack(requireTemporal(loadConfig()), { temporal: false, workers: false }, false);
    case 'worker':
      return runStack(requireTemporal(loadConfig()), { temporal: false, gateway: false }, false);
    case 'cluster':
      return cluster(rest);
    case 'token':
      return (await import('./token.ts')).tokenCommand(rest);
    case 'call':
      return (await import('./client.ts')).callCommand(clientConfig(), rest);
    case 'launches':
      return (await import('./client.ts')).launchesCommand(clientConfig(), rest);
    case 'upload':
      return (await import('./client.ts')).uploadCommand(clientConfig(), rest);
    case 'ui-guard':
      return (await import('./uiGuard.ts')).uiGuardCommand(rest);
    case 'temporal-certs':
      return (await import('../dev/certs.ts')).temporalCertsCommand(rest);
    case 'mcp':
      if (!rest.includes('--stdio'))
        throw new ConfigError(
          ['dossier mcp needs --stdio (HTTP is served by `dossier start` and `dossier gateway`)'],
          'Invalid arguments',
        );
      return (await import('./stdio.ts')).stdioCommand(clientConfig(), process.env.DOSSIER_TOKEN);
    case 'provision-temporal': {
      const config = loadConfig();
      const { resolveTemporalCli } = await import('../dev/temporalCli.ts');
      const { resolveUiServer } = await import('../dev/uiServer.ts');
      const cli = await resolveTemporalCli({ configured: config.temporalCli });
      console.log(cli.kind === 'path' ? cli.path : 'sdk-download');
      console.log(await resolveUiServer(config.temporalUiServer));
      if (rest.includes('--server')) {
        const { resolveTemporalServer } = await import('../dev/temporalServer.ts');
        const server = await resolveTemporalServer(config.temporalServerBin);
        console.log(server.server);
        console.log(server.sqlTool);
        // The server standalone activities need (DOSSIER_LAUNCH_DISPATCH=standalone): its tests run it.
        const { resolveServerVersion } = await import('../dev/sqliteServer.ts');
        console.log(await resolveServerVersion());
      }
      return;
    }
    case 'provision-analysis': {
      const { provisionProvider } = await import('../analysis/venv.ts');
      const provider = await provisionProvider(loadConfig().analysis.python);
      console.log(`angr ${provider.version} in ${provider.venv}`);
      return;
    }
    case 'provision-unpackers': {
      const { flashUnpackers } = await import('../python/flash.ts');
      const { unblobEnv } = await import('../python/unblob.ts');
      const { rulesEnv } = await import('../python/rules.ts');
      const python = loadConfig().analysis.python;
      for (const env of [await flashUnpackers(python), await unblobEnv(python), await rulesEnv(python)])
        console.log(`${env.version} in ${env.venv}`);
      return;
    }
    case 'version':
    case '--version': {
      // Which build runs: the compiled dist/ or the TypeScript sources (bin/dossier.js decides).
      const from = import.meta.url.endsWith('.ts') ? 'sources (src/)' : 'compiled build (dist/)';
      console.log(`${PRODUCT.name} ${PRODUCT.version}, running from the ${from}`);
      return;
    }
    case undefined:
    case 'help':
    case '--help':
      console.log(USAGE);
      return;
    default:
      console.error(`dossier: unknown command "${command}"\n\n${USAGE}`);
      process.exitCode = 2;
  }
}

function requireTemporal(config: Config): Config {
  if (!config.temporalAddress) {
    throw new ConfigError([
      'DOSSIER_TEMPORAL_ADDRESS is required for this command (host:port of the Temporal frontend)',
    ]);
  }
  return config;
}

async function runStack(config: Config, parts: StackParts, embedded: boolean) {
  const t0 = performance.now();
  // Nothing this process inherited reaches the programs it runs (nor its Temporal, UI or launcher).
  const { closeInheritedDescriptors } = await import('../sandbox/descriptors.ts');
  closeInheritedDescriptors();
  const { startStack } = await import('../dev/stack.ts');
  const stack = await startStack(config, parts);
  // The CLI finds this stack from the folder it was started in (`dossier call` with no DOSSIER_HOME).
  const forget = embedded ? recordStack(config.home) : () => undefined;
  stopOnSignal(() => {
    forget();
    return stack.stop();
  }, 'everything this command started');
  const seconds = ((performance.now() - t0) / 1000).toFixed(1);
  if (parts.gateway !== false) {
    if (embedded) writeDevJson(config, stack.devJson);
    const { AUDIT_VIEW_PATH } = await import('../dev/uiAuditView.ts');
    printReady(
      stack.devJson,
      AUDIT_VIEW_PATH,
      seconds,
      embedded ? config.home : undefined,
      path.join(config.inbox, config.team),
    );
  } else {
    console.error(
      `dossier: worker ready in ${seconds}s, serving ${config.capabilities.join(', ')} on ${stack.devJson.temporal_address}`,
    );
  }
}

async function cluster(args: string[]) {
  const [sub, ...rest] = args;
  if (sub !== 'up') {
    console.error(
      'usage: dossier cluster up [--gateways N] [--workers N] [--postgres URL] [--postgres-port P] [--separate-homes]',
    );
    process.exitCode = 2;
    return;
  }
  const { values } = parseArgs({
    args: rest,
    options: {
      gateways: { type: 'string' },
      workers: { type: 'string' },
      postgres: { type: 'string' },
      'postgres-port': { type: 'string' },
      'separate-homes': { type: 'boolean' },
    },
  });
  const number = (flag: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v))
      throw new ConfigError(
        [`--${flag}: expected a whole number, got ${JSON.stringify(v)}`],
        'Invalid arguments',
      );
    return Number(v);
  };
  if (values.postgres !== undefined && !/^postgres(ql)?:\/\/[^\s]+$/.test(values.postgres))
    throw new ConfigError(
      [
        `--postgres: expected a postgres:// URL of a user that may create databases, got ${JSON.stringify(values.postgres)}`,
      ],
      'Invalid arguments',
    );
  const config = loadConfig();
  const t0 = performance.now();
  const { startCluster } = await import('../dev/cluster.ts');
  // Until the cluster is up there is nothing to stop in order: everything it started dies with
  // this process (the parent-death signal), so a Ctrl-C during start-up just exits.
  const up: { cluster?: Awaited<ReturnType<typeof startCluster>> } = {};
  stopOnSignal(() => up.cluster?.stop(), 'the cluster');
  const running = (up.cluster = await startCluster(process.env, {
    gateways: number('gateways', values.gateways),
    workers: number('workers', values.workers),
    postgresUrl: values.postgres,
    postgresPort: number('postgres-port', values['postgres-port']),
    separateHomes: values['separate-homes'],
  }));
  const { info } = running;
  const { AUDIT_VIEW_PATH } = await import('../dev/uiAuditView.ts');
  const forget = recordStack(config.home);
  process.once('exit', forget);
  console.log(`dossier cluster is ready (${((performance.now() - t0) / 1000).toFixed(1)}s)

  MCP endpoints  ${info.mcp_urls.join('  ')}
  token          ${info.token}
  Temporal       ${info.temporal_address} (namespace ${info.namespace}; server metrics ${info.temporal_metrics_url})
                 mutual TLS: it serves only clients with a certificate from ${path.dirname(path.dirname(info.temporal_tls.ca))}
  Temporal UI    ${info.ui_url} (sign in with a token; each team sees its own)
  audit view     ${info.ui_url}${AUDIT_VIEW_PATH} (who ran what, on which target, and how it ended)
  workers        ${running.workers.length} (logs in ${path.join(config.home, 'cluster', 'logs')})
  details        ${path.join(config.home, 'cluster.json')}

Press Ctrl-C to stop.`);
}

/**
 * On SIGINT or SIGTERM, runs `stop` once and exits. While `stop` has nothing
 * to stop yet (still starting), exits at once: what the command started dies
 * with it (the parent-death signal).
 */
function stopOnSignal(stop: () => Promise<void> | undefined, what: string) {
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      // What it started dies with it (the parent-death signal); a launch cut short is settled
      // as interrupted by the next start, never run again.
      console.error(`\ndossier: ${signal} again: stopping now, without waiting for running launches.`);
      process.exit(130);
    }
    stopping = true;
    const stopped = stop();
    if (!stopped) {
      console.error(`\ndossier: ${signal} received during start-up; stopping.`);
      process.exit(130);
    }
    console.error(
      `\ndossier: ${signal} received, stopping ${what} (running launches get their grace, DOSSIER_SHUTDOWN_GRACE_MS; send it again to stop at once)…`,
    );
    stopped.then(
      () => process.exit(0),
      (err) => {
        console.error(`dossier: stop failed: ${err}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

function printReady(
  dev: DevJson,
  auditView: string,
  seconds: string,
  home: string | undefined,
  inbox: string,
) {
  mkdirSync(inbox, { recursive: true, mode: 0o700 });
  const connect = dev.token
    ? `Connect a client:
  claude mcp add --transport http dossier ${dev.mcp_url} --header "Authorization: Bearer ${dev.token}"

  # Cursor (.cursor/mcp.json) / any JSON-configured client:
  { "mcpServers": { "dossier": { "url": "${dev.mcp_url}", "headers": { "Authorization": "Bearer ${dev.token}" } } } }`
    : 'Clients authenticate with tokens from `npx dossier token create` (this gateway mints none itself).';
  console.log(`dossier is ready (${seconds}s)

  MCP endpoint   ${dev.mcp_url}${dev.token ? `\n  token          ${dev.token}` : ''}
  Temporal       ${dev.temporal_address} (namespace ${dev.namespace})
  Temporal UI    ${dev.ui_url} (sign in with a token; each team sees its own)
  audit view     ${dev.ui_url}${auditView} (who ran what, on which target, and how it ended)${home ? `\n  state          ${home} (connection details in ${home}/dev.json)` : ''}
  inbox          ${inbox} (files here can be registered: register_artifact {path}; or \`npx dossier upload FILE\`)
  CLI            ${cliLine(cliScript(), process.cwd())}

${connect}

Press Ctrl-C to stop.`);
}

/** The script this command runs as (bin/dossier.js, through npx's link too). */
function cliScript(): string {
  try {
    return realpathSync(process.argv[1] ?? 'bin/dossier.js');
  } catch {
    return path.resolve('bin/dossier.js');
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (String((err as NodeJS.ErrnoException)?.code).startsWith('ERR_PARSE_ARGS')) {
    // An unknown option or a missing value: what was wrong, and the usage; no stack.
    console.error(`dossier: ${(err as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (err instanceof ConfigError) console.error(`dossier: ${err.message}`);
  else console.error(`dossier: ${(err as Error)?.stack ?? err}`);
  process.exit(1);
});
