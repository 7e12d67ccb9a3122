// The MCP conformance suite against the real gateway, for both protocol eras on
// its one endpoint: 0.1.16's scenarios that apply to any server (the handshake
// era), and 0.2.0-alpha.12's every 2026-07-28 server scenario and the tasks
// extension's, with the checks that need the suite's own fixture tools named in
// expected-failures.2026-07-28.yaml (the suite fails on any other failure, and on
// a listed check that passes). Then the MCP Inspector CLI. All run under Node 22
// (which the suite needs) from tests/conformance, installed there on first use so
// that Node 22 never shadows the project's own Node in npm scripts.
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
/** The suite's 0.2.0-alpha.12 release, installed beside 0.1.16 under another name. */
const suite2026 = path.join(tools, 'node_modules', 'conformance-2026', 'dist', 'index.js');
const BASELINE_2026 = path.join(tools, 'expected-failures.2026-07-28.yaml');

/** The tasks extension's scenarios (0.2.0-alpha.12 runs extension scenarios one at a time). */
const TASK_SCENARIOS = [
  'tasks-lifecycle',
  'tasks-capability-negotiation',
  'tasks-wire-fields',
  'tasks-request-state-removal',
  'tasks-mrtr-input',
  'tasks-request-headers',
  'tasks-dispatch-and-envelope',
  'tasks-status-notifications',
  'tasks-required-task-error',
  'tasks-mrtr-composition',
];

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

describe('MCP conformance suite, 2026-07-28 (stateless era)', () => {
  const suite = (...args: string[]) =>
    run(node22, [suite2026, 'server', '--url', proxy.url, '--expected-failures', BASELINE_2026, ...args], {
      env: { ...process.env, PATH: `${path.dirname(node22)}:${process.env.PATH}` },
      timeout: 600_000,
    }).then(
      (r) => ({ code: 0, output: r.stdout + r.stderr }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({
        code: err.code ?? 1,
        output: `${err.stdout ?? ''}${err.stderr ?? ''}`,
      }),
    );

  it("every 2026-07-28 server scenario: nothing fails but the checks of the suite's own fixtures", async () => {
    const { code, output } = await suite('--suite', 'all', '--spec-version', '2026-07-28');
    // Scenarios that need none of the suite's fixtures pass whole; the rest fail only where the baseline says.
    for (const scenario of [
      'tools-list',
      'resources-list',
      'prompts-list',
      'completion-complete',
      'caching',
      'http-header-validation',
      'sep-2164-resource-not-found',
      'dns-rebinding-protection',
      'input-required-result-unsupported-methods',
    ])
      expect(output).toContain(`✓ ${scenario}:`);
    expect(output, output).toContain('Baseline check passed');
    expect(code, output).toBe(0);
  }, 660_000);

  it.each(TASK_SCENARIOS)(
    'the tasks extension: %s',
    async (scenario) => {
      const { code, output } = await suite('--scenario', scenario);
      expect(output, output).toContain('Baseline check passed');
      expect(code, output).toBe(0);
    },
    660_000,
  );
});

describe('MCP Inspector CLI', () => {
  /** The Inspector's CLI against the gateway (or `url`, another address of its endpoint). */
  const inspector = (...args: [...string[], { url: string }] | string[]) => {
    const last = args.at(-1);
    const url = typeof last === 'object' ? last.url : t.url;
    const rest = (typeof last === 'object' ? args.slice(0, -1) : args) as string[];
    return run(
      node22,
      [
        bin('inspector'),
        '--cli',
        url,
        '--transport',
        'http',
        '--header',
        `Authorization: Bearer ${t.token}`,
        ...rest,
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
  };

  it('lists the tools and calls one', async () => {
    const listed = JSON.parse((await inspector('--method', 'tools/list')).stdout) as {
      tools: { name: string }[];
    };
    expect(listed.tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['inspect_binary', 'inspect_analysis_view', 'enable_toolsets']),
    );
    const called = JSON.parse(
      (await inspector('--method', 'tools/call', '--tool-name', 'whoami')).stdout,
    ) as {
      structuredContent: { principal: string };
    };
    expect(called.structuredContent.principal).toBe('local');
  });

  it('finds every tool schema portable: no portability warning for the whole list (every toolset)', async () => {
    const strict = await inspector('--method', 'tools/list', '--strict', { url: `${t.url}?toolsets=all` });
    const tools = (JSON.parse(strict.stdout) as { tools: { name: string }[] }).tools;
    expect(tools.map((tool) => tool.name)).toContain('capture_process_scenario');
    // With findings the Inspector prints "Schema portability: …" or one "Warning:"/"Error:" block each.
    expect(strict.stderr).not.toMatch(/Schema portability|Warning:|Error:/);
  });
});
