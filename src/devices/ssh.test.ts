import { generateKeyPairSync } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DossierError } from '../domain/errors.ts';
import { openSsh } from './ssh.ts';

/** A real TCP listener standing for a device whose sshd drops every handshake: it resets each connection. */
async function droppingDevice() {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    socket.resetAndDestroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const { privateKey } = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  publicKeyEncoding: { type: 'spki', format: 'pem' },
});

describe('SSH handshakes a device drops', () => {
  let device: Awaited<ReturnType<typeof droppingDevice>> | undefined;
  afterEach(async () => {
    await device?.close();
  });

  it('are tried again a few times, then answer device_unavailable; the reset never escapes as an unhandled error', async () => {
    device = await droppingDevice();
    const opened = openSsh(
      'busy-board',
      {
        host: '127.0.0.1',
        port: device.port,
        user: 'nobody',
        host_key_fingerprint: `SHA256:${'A'.repeat(43)}`,
        reboot_command: ['/bin/true'],
      },
      { private_key: privateKey },
    );
    const err = await opened.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DossierError);
    expect(err).toMatchObject({ code: 'device_unavailable', details: { device: 'busy-board' } });
    expect(device.connections()).toBe(6);
    // A late report of the same connection's end must find a listener, not end the process.
    await new Promise((r) => setTimeout(r, 200));
  }, 30_000);
});
