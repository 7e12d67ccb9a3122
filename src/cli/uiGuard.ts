// `dossier ui-guard`: the audit UI's front door in front of a Temporal UI server
// (the compose file's audit-ui), and optionally the UI server's read-only way to
// Temporal, when this process holds the UI server's certificate; --codec names the gateway
// codec endpoint the guard forwards a signed-in viewer's decodes to.
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.ts';

export async function uiGuardCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      upstream: { type: 'string' },
      listen: { type: 'string', default: '127.0.0.1:8233' },
      'temporal-reads': { type: 'string' },
      codec: { type: 'string' },
    },
  });
  const address = (flag: string, value: string | undefined) => {
    const m = value ? /^(.+):(\d{1,5})$/.exec(value) : null;
    const port = Number(m?.[2]);
    if (!m || port < 1 || port > 65_535)
      throw new ConfigError(
        [`--${flag} is HOST:PORT (got ${JSON.stringify(value ?? '')})`],
        'Invalid arguments',
      );
    return { host: m[1]!.replace(/^\[(.*)\]$/, '$1'), port };
  };
  const upstream = address('upstream', values.upstream);
  const listen = address('listen', values.listen);
  const codec = values.codec?.replace(/\/+$/, '');
  if (codec !== undefined && !/^https?:\/\/[^/]+(\/.*)?$/.test(codec))
    throw new ConfigError(
      [`--codec is a gateway's codec endpoint URL, http://HOST:PORT/codec (got ${JSON.stringify(codec)})`],
      'Invalid arguments',
    );
  // Tokens are the gateways' (DOSSIER_STORE): a viewer sees the workflows of its token's team.
  const config = loadConfig();
  // The UI server's way to Temporal, when this process holds its certificate: reads only.
  let reads: { stop(): Promise<void> } | undefined;
  if (values['temporal-reads'] !== undefined) {
    const at = address('temporal-reads', values['temporal-reads']);
    if (!config.temporalAddress || !config.temporalTls)
      throw new ConfigError([
        '--temporal-reads needs DOSSIER_TEMPORAL_ADDRESS and DOSSIER_TEMPORAL_TLS_CERT, _KEY and _CA (the UI server’s certificate)',
      ]);
    const { startTemporalReads } = await import('../dev/temporalReads.ts');
    reads = await startTemporalReads({ ...at, upstream: config.temporalAddress, tls: config.temporalTls });
  }
  const { openStore } = await import('../store/store.ts');
  const store = await openStore(config.store);
  const { startUiGuard } = await import('../dev/uiGuard.ts');
  const guard = await startUiGuard({
    ...listen,
    upstream,
    namespace: config.namespace,
    viewer: (t) => store.tokens.resolve(t),
    codec,
  });
  console.log(
    `dossier ui-guard: ${guard.url} serves http://${upstream.host}:${upstream.port} read-only, each signed-in team its own workflows of namespace ${config.namespace}${codec ? `; payloads opened by ${codec}` : '; no codec endpoint (payloads stay sealed)'}`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await guard.stop();
  await reads?.stop();
  await store.close();
}
