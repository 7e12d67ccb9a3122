// Prepares a Temporal namespace for dossier through the public APIs, so that a
// fresh dev server, an existing SQLite file and a real cluster all end up alike:
// the namespace exists with the configured retention (the dedup window) and
// carries every custom search attribute the Temporal UI audit relies on.
import { Connection } from '@temporalio/client';
import { msToTs, optionalTsToMs } from '@temporalio/common/lib/time.js';
import { SearchAttributeType } from '@temporalio/common';
import proto from '@temporalio/proto';
import { SEARCH_ATTRIBUTES } from './searchAttributes.ts';
import { clientTls, type TemporalTls } from './tls.ts';

const { IndexedValueType } = proto.temporal.api.enums.v1;
const DAY_MS = 24 * 60 * 60 * 1000;

/** A client connection once Temporal answers, over mutual TLS when `tls` is given. */
export async function connectWhenReady(
  address: string,
  timeoutMs = 60_000,
  tls?: TemporalTls,
): Promise<Connection> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: 2_000, tls: clientTls(tls) });
      await connection.workflowService.getSystemInfo({});
      return connection;
    } catch (err) {
      lastError = err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(
    `Temporal at ${address} did not answer within ${timeoutMs} ms (${(lastError as Error)?.message}). Check that the server is running, the address is right${tls ? ', and that it trusts DOSSIER_TEMPORAL_TLS_CERT and DOSSIER_TEMPORAL_TLS_CA signed its certificate' : ', and whether it requires TLS (DOSSIER_TEMPORAL_TLS_*)'}.`,
  );
}

export async function ensureNamespace(connection: Connection, namespace: string, retentionDays: number) {
  const retention = msToTs(retentionDays * DAY_MS);
  try {
    const described = await connection.workflowService.describeNamespace({ namespace });
    const current = optionalTsToMs(described.config?.workflowExecutionRetentionTtl) ?? 0;
    if (current !== retentionDays * DAY_MS) {
      await connection.workflowService.updateNamespace({
        namespace,
        config: { workflowExecutionRetentionTtl: retention },
      });
    }
  } catch (err) {
    if ((err as { code?: number }).code !== 5 /* NOT_FOUND */) throw err;
    await connection.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: retention,
      description: 'dossier launches and analyses',
    });
  }
  await ensureSearchAttributes(connection, namespace);
}

async function ensureSearchAttributes(connection: Connection, namespace: string) {
  const types = new Map<string, proto.temporal.api.enums.v1.IndexedValueType>(
    Object.values(SEARCH_ATTRIBUTES).map((k) => [
      k.name,
      k.type === SearchAttributeType.KEYWORD_LIST
        ? IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST
        : IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    ]),
  );
  const wanted = [...types.keys()];
  for (let attempt = 0; ; attempt++) {
    try {
      const listed = await connection.operatorService.listSearchAttributes({ namespace });
      const missing = wanted.filter((name) => !(name in (listed.customAttributes ?? {})));
      if (missing.length === 0) return;
      await connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map((name) => [name, types.get(name)!])),
      });
    } catch (err) {
      // A namespace registered a moment ago may not be visible to every service yet.
      if (attempt >= 50) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * Refuses DOSSIER_LAUNCH_DISPATCH=standalone on a Temporal whose namespace has no standalone
 * activities (servers before 1.31, the CLI's dev server that `npm start` runs among them).
 */
export async function requireStandaloneActivities(
  connection: Connection,
  namespace: string,
  address: string,
) {
  const described = await connection.workflowService.describeNamespace({ namespace });
  if (described.namespaceInfo?.capabilities?.standaloneActivities) return;
  throw new Error(
    `DOSSIER_LAUNCH_DISPATCH=standalone needs a Temporal server with standalone activities (1.31 or later), and namespace ${namespace} on ${address} has none (the embedded dev server that \`npm start\` runs is older). Point DOSSIER_TEMPORAL_ADDRESS at such a server (\`dossier provision-temporal --server\` builds one; docs/operations.md, "Standalone dispatch"), or unset DOSSIER_LAUNCH_DISPATCH.`,
  );
}
