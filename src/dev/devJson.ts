// dev.json: how the running embedded stack is reached (endpoint, token,
// Temporal, UI); cluster.json, the same for `dossier cluster up`. Read by the
// short CLI commands, so it imports nothing heavy.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.ts';

export interface DevJson {
  mcp_url: string;
  token: string;
  temporal_address: string;
  ui_url: string;
  namespace: string;
}

export function devJsonPath(config: Config): string {
  return path.join(config.home, 'dev.json');
}

export function writeDevJson(config: Config, devJson: DevJson) {
  writeFileSync(devJsonPath(config), `${JSON.stringify(devJson, null, 2)}\n`, { mode: 0o600 });
}

/** Written by `dossier cluster up` to DOSSIER_HOME/cluster.json (0600): how the cluster is reached. */
export interface ClusterJson {
  mcp_urls: string[];
  token: string;
  temporal_address: string;
  /** The client certificate the cluster's Temporal requires (PEM files; the key is 0600). */
  temporal_tls: { cert: string; key: string; ca: string; server_name: string };
  temporal_metrics_url: string;
  ui_url: string;
  namespace: string;
  store: string;
}

export function clusterJsonPath(config: Config): string {
  return path.join(config.home, 'cluster.json');
}
