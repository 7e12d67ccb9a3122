import net from 'node:net';
import { FETCH_BLOCKED_PORTS } from '../../src/config.ts';

/**
 * A TCP port that was free a moment ago on 127.0.0.1, below the ephemeral range: a port the
 * kernel hands out (to outgoing connections, to `listen(0)`, to podman publishing a container
 * port) could be taken again between this look and the listen that follows it.
 */
export function freePort(): Promise<number> {
  return freeLowPorts([0]);
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A port `p` below the ephemeral range such that every port `p + offset` was
 * free a moment ago: a real Temporal server keeps its membership ports below
 * 32768, and the ephemeral range here starts at 32768. None is a port fetch() refuses.
 */
export async function freeLowPorts(offsets: number[]): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = 2_000 + Math.floor(Math.random() * 28_000);
    const ports = offsets.map((o) => base + o);
    if (ports.some((p) => p < 1_024 || p > 32_767 || FETCH_BLOCKED_PORTS.has(p))) continue;
    if ((await Promise.all(ports.map(bindable))).every(Boolean)) return base;
  }
  throw new Error('no free ports below 32768');
}
