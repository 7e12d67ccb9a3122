// The MCP conformance suite's scenarios that apply to any server, and the MCP
// Inspector CLI, against the real gateway. Both run under Node 22 (which the
// suite needs) from tests/conformance, installed there on first use so that
// Node 22 never shadows the project's own Node in npm scripts.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthProxy } from '../helpers/authProxy.ts';
import { freePort } from '../helpers/ports.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

const run = promisify(execFile);
const tools = path.resolve('tests/conformance');
const node22 = path.join(tools, 'node_modules', 'node', 'bin', 'node');
const bin = (name: string) => path.join(tools, 'node_modules', '.bin', name);

const SCENARIOS = [
  'server-initialize',
  'ping',
  'logging-set-level',
  'tools-list',
  'prompts-list',
  'resources-list',
  'server-sse-multiple-streams',
  'dns-rebinding-protection',
];

let t: TestStack;
let proxy: Awaited<ReturnType<typeof startAuthProxy>>;

beforeAll(async () => {
  if (!existsSync(node22)) {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: tools, stdio: 'ignore', timeout: 300_000 });
  }
  // The proxy's own address is a legitimate Host for the gateway; any other is not.
  const proxyPort = await freePort();
  t = await startTestStack({ env: { DOSSIER_ALLOWED_HOSTS: `127.0.0.1:${proxyPort}` } });
  proxy = await startAuthProxy(t.url, t.token, proxyPort);
}, 600_000);

afterAll(async () => {
  await proxy?.close().catch(() => undefined);
  await t?.stop(true);
});

describe('MCP conformance suite', () => {
  it.each(SCENARIOS)('%s passes', async (scenario) => {
    const result = await run(
      node22,
      [bin('conformance'), 'server', '--url', proxy.url, '--scenario', scenario],
      { env: { ...process.env, PATH: `${path.dirname(node22)}:${process.env.PATH}` }, timeout: 120_000 },
    ).catch((err: { stdout?: string; stderr?: string }) => err);
    const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
    const [, passed, total, failed] = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(output) ?? [];
    expect(Number(total), output).toBeGreaterThan(0);
    expect(passed, output).toBe(total);
    expect(failed, output).toBe('0');
  });
});

describe('MCP Inspector CLI', () => {
  const inspector = (...args: string[]) =>
    run(
      node22,
      [
        bin('inspector'),
        '--cli',
        t.url,
        '--transport',
        'http',
        '--header',
        `Authorization: Bearer ${t.token}`,
        ...args,
      ],
      {
        env: {
          ...process.env,
          PATH: `${path.dirname(node22)}:${process.env.PATH}`,
          MCP_CATALOG_PATH: path.join(t.home, 'inspector.json'),
        },
        timeout: 120_000,
      },
    );

  it('lists the tools and calls one', async () => {
    const listed = JSON.parse((await inspector('--method', 'tools/list')).stdout) as {
      tools: { name: string }[];
    };
    expect(listed.tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['capture_process_scenario', 'inspect_analysis_view']),
    );
    const called = JSON.parse(
      (await inspector('--method', 'tools/call', '--tool-name', 'whoami')).stdout,
    ) as {
      structuredContent: { principal: string };
    };
    expect(called.structuredContent.principal).toBe('local');
  });
});
