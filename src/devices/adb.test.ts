// What an adb session's programs can reach: the host's adb server, through the
// worker's relay, and nothing else of the host's network. Real bwrap, real adb,
// and a stand-in adb server that answers the two requests `adb devices` makes.
import { existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testSandbox } from '../../tests/helpers/sandbox.ts';
import { runHelper } from '../sandbox/helpers.ts';
import { adbRun, adbServerRelay, type AdbRelay } from './adb.ts';

const sandbox = testSandbox(1_900_300);

/** A stand-in adb server on the host's loopback: records each request, answers version and devices. */
function standInServer(): Promise<{ server: net.Server; port: number; requests: string[] }> {
  const requests: string[] = [];
  const server = net.createServer((c) => {
    c.on('error', () => undefined);
    c.once('data', (data: Buffer) => {
      const request = data.subarray(4, 4 + parseInt(data.subarray(0, 4).toString(), 16)).toString();
      requests.push(request);
      // adb's smart-socket protocol: OKAY, then a reply prefixed by its length in four hex digits.
      const reply = request === 'host:version' ? '0029' : request === 'host:devices' ? '' : undefined;
      c.end(
        reply === undefined ? 'FAIL0007unknown' : `OKAY${reply.length.toString(16).padStart(4, '0')}${reply}`,
      );
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, port: (server.address() as net.AddressInfo).port, requests }),
    ),
  );
}

/** The host's own addresses besides loopback, where its services may listen. */
const hostAddresses = Object.values(os.networkInterfaces())
  .flat()
  .filter((a) => a && a.family === 'IPv4' && !a.internal)
  .map((a) => a!.address);

describe.skipIf(!existsSync('/usr/bin/adb'))(
  'an adb session’s programs (Debian’s adb is not installed here)',
  () => {
    let adbServer: Awaited<ReturnType<typeof standInServer>>;
    let hostService: net.Server;
    let hostPort: number;
    let relay: AdbRelay;
    beforeAll(async () => {
      adbServer = await standInServer();
      relay = await adbServerRelay(adbServer.port);
      // A service of the host's (a database, Temporal, a metadata endpoint) on every address it has.
      hostService = net.createServer((c) => c.end('reached\n'));
      await new Promise<void>((resolve) => hostService.listen(0, '0.0.0.0', resolve));
      hostPort = (hostService.address() as net.AddressInfo).port;
    });
    afterAll(async () => {
      await relay?.close();
      adbServer?.server.close();
      hostService?.close();
    });

    it('adb reaches the host’s adb server through the relay', async () => {
      const out = await runHelper(
        sandbox,
        adbRun(relay, { program: 'adb', pkg: 'adb', args: ['devices'], timeoutMs: 30_000 }),
      );
      expect(out).toMatch(/List of devices attached/);
      expect(adbServer.requests).toEqual(['host:version', 'host:devices']);
    });

    it('a program started the way adb is reaches neither the host’s loopback nor its other addresses', async () => {
      const probe = [
        'import socket, sys',
        'for host in sys.argv[2:]:',
        '    try:',
        '        socket.create_connection((host, int(sys.argv[1])), timeout=3).recv(16)',
        '        print(host, "reached")',
        '    except OSError as e:',
        '        print(host, "refused", type(e).__name__)',
      ].join('\n');
      const out = await runHelper(
        sandbox,
        adbRun(relay, {
          program: '/usr/bin/python3',
          pkg: 'python3',
          args: ['-c', probe, String(hostPort), '127.0.0.1', ...hostAddresses],
          timeoutMs: 30_000,
        }),
      );
      const lines = out.trim().split('\n');
      expect(lines).toHaveLength(1 + hostAddresses.length);
      for (const line of lines) expect(line).toMatch(/ refused /);
    });
  },
);
