// Temporal over mutual TLS, the client side: a cluster's Temporal frontend
// refuses every connection that does not present a certificate signed by the
// cluster's own CA, and dossier's gateways, workers and setup calls present
// theirs (DOSSIER_TEMPORAL_TLS_CERT, _KEY, _CA, _SERVER_NAME). The files are
// read at each connect, so a renewed certificate is picked up by a restart.
import { readFileSync } from 'node:fs';
import type { TLSConfig } from '@temporalio/client';

/** Where a client's certificate, its key and the CA that signed the server's are (PEM files). */
export interface TemporalTls {
  cert: string;
  key: string;
  ca: string;
  /** The name the server's certificate must carry, when the address names it otherwise (an IP). */
  serverName?: string;
}

/** The SDK's TLS options (both `Connection` and `NativeConnection` take them), or none for plain TCP. */
export function clientTls(tls: TemporalTls | undefined): TLSConfig | undefined {
  if (!tls) return undefined;
  return {
    serverRootCACertificate: readFileSync(tls.ca),
    clientCertPair: { crt: readFileSync(tls.cert), key: readFileSync(tls.key) },
    ...(tls.serverName ? { serverNameOverride: tls.serverName } : {}),
  };
}

/** The configuration that carries a client's TLS to a child process (a cluster member). */
export function tlsEnv(tls: TemporalTls): Record<string, string> {
  return {
    DOSSIER_TEMPORAL_TLS_CERT: tls.cert,
    DOSSIER_TEMPORAL_TLS_KEY: tls.key,
    DOSSIER_TEMPORAL_TLS_CA: tls.ca,
    ...(tls.serverName ? { DOSSIER_TEMPORAL_TLS_SERVER_NAME: tls.serverName } : {}),
  };
}
