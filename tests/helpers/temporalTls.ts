// What a Temporal server that requires client certificates says to whoever
// knocks: the SDK's own client (plain, TLS without a certificate, TLS with a
// certificate of another CA) and a bare TLS handshake on any of its ports.
import { Connection, type TLSConfig } from '@temporalio/client';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';

/** `served` when Temporal answered a GetSystemInfo call over this connection, else why not. */
export async function temporalAnswer(address: string, options?: TLSConfig): Promise<string> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, tls: options, connectTimeout: 5_000 });
    await connection.workflowService.getSystemInfo({});
    return 'served';
  } catch (err) {
    return (err as Error).message;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

const H2_PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';

/**
 * A TLS handshake that trusts the server's CA and presents `client`'s certificate (or none), then
 * speaks HTTP/2: `served` when the server answers (its SETTINGS), or the alert it ends with.
 */
export function bareHandshake(
  server: { host: string; port: number; ca: Buffer; servername: string },
  client?: { cert: string; key: string },
): Promise<string> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      ...server,
      ALPNProtocols: ['h2'],
      ...(client ? { cert: readFileSync(client.cert), key: readFileSync(client.key) } : {}),
    });
    const done = (outcome: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => done('no answer within 5 s'), 5_000);
    socket.once('secureConnect', () => socket.write(H2_PREFACE));
    socket.once('data', () => done('served'));
    socket.once('error', (err) => done(`refused: ${err.message}`));
    socket.once('close', () => done('refused: closed'));
  });
}
