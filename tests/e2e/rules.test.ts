// Rule scans as a shared analysis: a YARA bundle registered (and refused when a
// rule does not compile), scanned over an extraction tree with exact matches
// (a string, a hex pattern with wildcards, a condition), the same scan by a
// second principal attached to the first, and a rule made slow bounded by the
// scan's time limit; another team sees neither bundle nor scan; every input
// and output bounded, with errors that say which bound.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRows, call } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const work = scratchDir('rules');
let t: TestStack;
let alice: Client;
let bob: Client;
let carol: Client;

const RULES = `
rule secret_string : credentials { meta: family = "backdoor" severity = 3
  strings: $s = "s3cr3t-backdoor" condition: $s }
rule crypto_hex : crypto {
  strings: $h = { DE AD ?? EF [2-4] CA FE } condition: $h }
rule two_markers { strings: $a = "MARKER-A" $b = "MARKER-B" condition: $a and #b >= 2 }
`;

// Where each pattern sits, so the offsets can be checked exactly.
const prefix = randomBytes(100).map((b) => (b === 0xde || b === 0x4d ? 0 : b));
const fileA = Buffer.concat([
  prefix,
  Buffer.from('s3cr3t-backdoor'),
  Buffer.from([0xde, 0xad, 0x42, 0xef, 1, 2, 3, 0xca, 0xfe]),
]);
const fileB = Buffer.from('MARKER-A ... MARKER-B ... MARKER-B\n');
const fileC = Buffer.from('MARKER-A only one MARKER-B\n');

beforeAll(async () => {
  const tree = path.join(work, 'tree');
  mkdirSync(path.join(tree, 'bin'), { recursive: true });
  writeFileSync(path.join(tree, 'bin/a.bin'), fileA);
  writeFileSync(path.join(tree, 'b.txt'), fileB);
  writeFileSync(path.join(tree, 'c.txt'), fileC);
  execFileSync('tar', ['-cf', path.join(work, 'tree.tar'), '-C', tree, '.']);
  writeFileSync(path.join(work, 'big.bin'), randomBytes(2 * 1024 * 1024));
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${work}` } });
  alice = await t.connect();
  bob = await t.connect(await t.tokenFor('bob', 'local'));
  carol = await t.connect(await t.tokenFor('carol', 'other'));
}, 120_000);
afterAll(async () => {
  await t?.stop(true);
});

/** alice's scan of `artifact` with `rules`, waited for. */
function scanArtifact(rules: string, artifact: string, more: Record<string, unknown> = {}) {
  return call(alice, 'scan_with_rules', { rules, artifact, wait_ms: 100_000, detail: 'summary', ...more });
}

/** A scan of `artifact` with `rules` given timeout_s 3, and how long the call took. */
async function scanFor3s(rules: string, artifact: string) {
  const started = Date.now();
  const scan = await scanArtifact(rules, artifact, { timeout_s: 3 });
  return { scan, ms: Date.now() - started };
}

describe('register_rules', () => {
  it('a rule that does not compile is refused with where and why; nothing is stored', async () => {
    const reply = await call(alice, 'register_rules', {
      name: 'broken',
      sources: [{ name: 'bad', text: 'rule broken { condition: undeclared_thing }' }],
    });
    expect(reply.error.code).toBe('invalid_params');
    expect(reply.error.message).toMatch(/bad.*do not compile.*undeclared_thing/s);
    expect(reply.error.message).toMatch(/bad:1:/);
    const listed = await call(alice, 'list_artifacts', {});
    expect(JSON.stringify(listed)).not.toContain('rules:broken');
  });
});

describe('hostile rules', () => {
  it('a rule file cannot include a file of the worker: include is refused, and so is an artifact that is no bundle', async () => {
    const included = await call(alice, 'register_rules', {
      name: 'include',
      sources: [{ name: 'inc', text: 'include "/etc/passwd"\nrule a { condition: true }' }],
    });
    expect(included.error?.code).toBe('invalid_params');
    expect(included.error.message).toMatch(/include/);
    expect(included.error.message).not.toMatch(/root:/);
    // A registered artifact that register_rules never checked, named as rules: refused with why.
    const raw = path.join(work, 'raw.yar');
    writeFileSync(raw, 'rule a { condition: true }');
    const artifact = await call(alice, 'register_artifact', { path: raw });
    const target = await call(alice, 'register_artifact', { path: path.join(work, 'big.bin') });
    const scan = await call(alice, 'scan_with_rules', {
      rules: artifact.artifact.digest,
      artifact: target.artifact.digest,
      wait_ms: 60_000,
    });
    expect(scan.error?.code, JSON.stringify(scan)).toBe('invalid_params');
    expect(scan.error.message).toMatch(/not a rule bundle/);
  });

  it('rules that match everywhere are stopped at timeout_s, and what their author wrote is bounded in every row', async () => {
    const zeros = path.join(work, 'zeros.bin');
    writeFileSync(zeros, Buffer.alloc(1024 * 1024));
    const target = await call(alice, 'register_artifact', { path: zeros });
    const flood = await call(alice, 'register_rules', {
      name: 'flood',
      sources: [
        {
          name: 'flood',
          text: Array.from(
            { length: 1_000 },
            (_, i) => `rule r${i} { strings: $a = { 00 } condition: $a }`,
          ).join('\n'),
        },
      ],
    });
    expect(flood.error).toBeUndefined();
    const { scan, ms } = await scanFor3s(flood.rules, target.artifact.digest);
    expect(scan.status, JSON.stringify(scan.error)).toBe('succeeded');
    expect(['timeout', 'capped']).toContain(scan.summary.status);
    expect(scan.truncated).toBe(true);
    expect(ms).toBeLessThan(60_000);

    const wordy = await call(alice, 'register_rules', {
      name: 'wordy',
      sources: [
        {
          name: 'wordy',
          text: `rule ${'n'.repeat(300)} : ${Array.from({ length: 40 }, (_, i) => `t${i}`).join(' ')} { meta: m = "${'x'.repeat(100_000)}" strings: $a = { 00 00 00 00 } condition: $a }`,
        },
      ],
    });
    expect(wordy.error).toBeUndefined();
    expect(wordy.rule_names[0].length).toBeLessThanOrEqual(2 * 128 + 1);
    const rows = await call(alice, 'scan_with_rules', {
      rules: wordy.rules,
      artifact: target.artifact.digest,
      max_matches: 5,
      wait_ms: 100_000,
      detail: 'summary',
    });
    expect(rows.summary).toMatchObject({ status: 'capped', matches: 5 });
    const matches = await allRows(alice, rows.evidence_id, 'matches');
    expect(matches).toHaveLength(5);
    for (const m of matches) {
      expect(m.rule.length).toBeLessThanOrEqual(128);
      expect(m.tags).toHaveLength(16);
      expect(String(m.metadata.m).length).toBeLessThanOrEqual(256);
    }
  });
});

describe('scan_with_rules over an extraction', () => {
  it('matches exactly, and the same scan by a second principal attaches', async () => {
    const rules = await call(alice, 'register_rules', {
      name: 'team-rules',
      sources: [{ name: 'main', text: RULES }],
    });
    expect(rules.error).toBeUndefined();
    expect(rules.rule_count).toBe(3);
    const registered = await call(alice, 'register_artifact', { path: path.join(work, 'tree.tar') });
    const extracted = await call(alice, 'extract_artifact', {
      artifact: registered.artifact.digest,
      idempotency_key: 'tree-1',
      detail: 'summary',
    });
    expect(extracted.status).toBe('succeeded');

    const args = {
      rules: rules.rules,
      evidence_id: extracted.evidence_id,
      wait_ms: 100_000,
      detail: 'summary',
    };
    const first = await call(alice, 'scan_with_rules', args);
    expect(first.status, JSON.stringify(first.error)).toBe('succeeded');
    expect(first.summary).toMatchObject({ status: 'complete', files: 3, scanned: 3, rules_matched: 3 });

    const matches = await allRows(alice, first.evidence_id, 'matches');
    const of = (rule: string) => matches.filter((m) => m.rule === rule);
    expect(of('secret_string')).toEqual([
      expect.objectContaining({
        path: './bin/a.bin',
        namespace: 'main',
        tags: ['credentials'],
        metadata: { family: 'backdoor', severity: 3 },
        pattern: '$s',
        offset: 100,
        length: 15,
        data_hex: Buffer.from('s3cr3t-backdoor').toString('hex'),
      }),
    ]);
    expect(of('crypto_hex')).toEqual([
      expect.objectContaining({
        path: './bin/a.bin',
        pattern: '$h',
        offset: 115,
        length: 9,
        data_hex: 'dead42ef010203cafe',
      }),
    ]);
    const markers = of('two_markers');
    expect(markers.every((m) => m.path === './b.txt')).toBe(true);
    expect(markers.map((m) => [m.pattern, m.offset])).toEqual([
      ['$a', 0],
      ['$b', 13],
      ['$b', 26],
    ]);

    const second = await call(bob, 'scan_with_rules', args);
    expect(second.evidence_id).toBe(first.evidence_id);
    expect(second.analysis.attached).toBe(true);
    expect(second.analysis.requested_by).toBe(first.analysis.requested_by);
    expect(second.analysis.requested_by).not.toBe('bob');
  });

  /** alice's rules and a fresh extraction of the tree, whose `b.txt` `change` alters; her scan of it after. */
  async function scanAfter(key: string, change: (file: string) => void) {
    const rules = await call(alice, 'register_rules', {
      name: 'team-rules',
      sources: [{ name: 'main', text: RULES }],
    });
    const registered = await call(alice, 'register_artifact', { path: path.join(work, 'tree.tar') });
    const extracted = await call(alice, 'extract_artifact', {
      artifact: registered.artifact.digest,
      idempotency_key: key,
      detail: 'summary',
    });
    expect(extracted.status).toBe('succeeded');
    change(path.join(t.home, extracted.summary.output, 'b.txt'));
    return call(alice, 'scan_with_rules', {
      rules: rules.rules,
      evidence_id: extracted.evidence_id,
      wait_ms: 100_000,
    });
  }

  it('a file changed since its extraction is refused: no answer is kept about bytes the manifest does not name', async () => {
    const scan = await scanAfter('tree-tampered', (file) => {
      chmodSync(file, 0o644);
      writeFileSync(file, 'MARKER-A MARKER-B MARKER-B, and more since');
    });
    expect(scan.status).toBe('failed');
    expect(scan.error).toMatchObject({ code: 'not_found', details: { entry: './b.txt' } });
    expect(scan.error.message).toMatch(/no longer the file its manifest names/);
  });

  /** A scan after `change` to b.txt fails at once, not_found, naming b.txt as gone from the output. */
  async function expectGone(key: string, change: (file: string) => void) {
    let changed = 0;
    const scan = await scanAfter(key, (file) => {
      change(file);
      changed = Date.now();
    });
    expect(scan.status).toBe('failed');
    expect(scan.error).toMatchObject({ code: 'not_found', details: { entry: './b.txt' } });
    expect(scan.error.message).toMatch(/no longer on this worker/);
    // Refused at once: no scanner ran, or waited, to the scan's time limit.
    expect(Date.now() - changed).toBeLessThan(20_000);
  }

  it('a file removed since its extraction fails the scan with which file, at once', async () => {
    await expectGone('tree-removed', (file) => rmSync(file));
  });

  it('a file over 64 MiB is scanned through the descriptor it was hashed from: the match and its bytes exact', async () => {
    const rules = await call(alice, 'register_rules', {
      name: 'big-rules',
      sources: [{ name: 'main', text: RULES }],
    });
    const at = 65 * 1024 * 1024 + 123;
    const big = Buffer.alloc(66 * 1024 * 1024);
    big.write('s3cr3t-backdoor', at, 'latin1');
    const file = path.join(work, 'over-64-mib.bin');
    writeFileSync(file, big);
    const registered = await call(alice, 'register_artifact', { path: file });
    const scan = await scanArtifact(rules.rules, registered.artifact.digest);
    expect(scan.status, JSON.stringify(scan.error)).toBe('succeeded');
    expect(await allRows(alice, scan.evidence_id, 'matches')).toEqual([
      expect.objectContaining({
        rule: 'secret_string',
        offset: at,
        length: 15,
        data_hex: Buffer.from('s3cr3t-backdoor').toString('hex'),
      }),
    ]);
    expect(await allRows(alice, scan.evidence_id, 'files')).toEqual([
      expect.objectContaining({ status: 'scanned', matches: 1, sha256: registered.artifact.digest.slice(7) }),
    ]);
  });

  it('a FIFO put in the place of a file fails the scan with which file, and is not waited on', async () => {
    await expectGone('tree-fifo', (file) => {
      rmSync(file);
      execFileSync('mkfifo', [file]);
    });
  });

  it('a link put in the place of a file is not followed: the scan fails with which file', async () => {
    await expectGone('tree-link', (file) => {
      const twin = path.join(path.dirname(file), 'a-twin.txt');
      writeFileSync(twin, readFileSync(file));
      rmSync(file);
      symlinkSync('a-twin.txt', file);
    });
  });

  it('an extraction whose whole output is gone fails the scan before the scanner starts', async () => {
    const scan = await scanAfter('tree-output-gone', (file) =>
      rmSync(path.dirname(file), { recursive: true, force: true }),
    );
    expect(scan.status).toBe('failed');
    expect(scan.error).toMatchObject({ code: 'not_found' });
    expect(scan.error.message).toMatch(/The output of ev_[0-9a-f]+ is no longer on this worker/);
  });

  it('a rule made slow is bounded by the scan time limit, and says so', async () => {
    const slow = await call(alice, 'register_rules', {
      name: 'slow',
      sources: [
        {
          name: 'slow',
          text: 'rule quadratic { condition: for all i in (0..filesize - 1) : ( for all j in (0..filesize - 1) : ( uint8(i) ^ uint8(j) != 0x100 ) ) }',
        },
      ],
    });
    expect(slow.error).toBeUndefined();
    const big = await call(alice, 'register_artifact', { path: path.join(work, 'big.bin') });
    const { scan, ms } = await scanFor3s(slow.rules, big.artifact.digest);
    expect(scan.status, JSON.stringify(scan.error)).toBe('succeeded');
    expect(scan.summary.status).toBe('timeout');
    expect(ms).toBeLessThan(60_000);
    const files = await allRows(alice, scan.evidence_id, 'files');
    expect(files[0]).toMatchObject({ status: 'timeout' });
  });
});

describe('teams and bounds', () => {
  const markers = {
    name: 'markers',
    sources: [{ name: 'm', text: 'rule marker { strings: $m = "MARK" condition: $m }' }],
  };

  it("another team can use neither a team's bundle nor its extraction, and its own same scan is its own", async () => {
    const rules = await call(alice, 'register_rules', markers);
    const target = path.join(work, 'marks.bin');
    writeFileSync(target, Buffer.from('MARK MARK MARK'));
    const mine = await call(alice, 'register_artifact', { path: target });
    const extracted = await call(alice, 'extract_artifact', {
      artifact: (await call(alice, 'register_artifact', { path: path.join(work, 'tree.tar') })).artifact
        .digest,
      idempotency_key: 'tree-teams',
      detail: 'summary',
    });
    const scan = await scanArtifact(rules.rules, mine.artifact.digest);
    expect(scan.status, JSON.stringify(scan.error)).toBe('succeeded');
    expect(scan.summary.matches).toBe(3);

    // carol knows every digest and id, but they are not her team's.
    const theirs = await call(carol, 'register_artifact', { path: target });
    const withAlicesRules = await call(carol, 'scan_with_rules', {
      rules: rules.rules,
      artifact: theirs.artifact.digest,
      wait_ms: 100_000,
    });
    expect(withAlicesRules.error?.code).toBe('not_found');
    expect(withAlicesRules.error.message).toContain(rules.rules);
    const ownRules = await call(carol, 'register_rules', markers);
    expect(ownRules.rules).toBe(rules.rules);
    const onAlicesTree = await call(carol, 'scan_with_rules', {
      rules: ownRules.rules,
      evidence_id: extracted.evidence_id,
      wait_ms: 100_000,
    });
    expect(onAlicesTree.error?.code).toBe('not_found');
    expect(await call(carol, 'get_evidence', { evidence_id: scan.evidence_id })).toMatchObject({
      error: { code: 'not_found' },
    });
    // The same (rules, target) in her team runs for her team: not attached to alice's.
    const own = await call(carol, 'scan_with_rules', {
      rules: ownRules.rules,
      artifact: theirs.artifact.digest,
      wait_ms: 100_000,
      detail: 'summary',
    });
    expect(own.status, JSON.stringify(own.error)).toBe('succeeded');
    expect(own.analysis.attached).toBe(false);
    expect(own.analysis.requested_by).toBe('carol');
    expect(own.summary.matches).toBe(3);
  });

  it('matches stop at max_matches and the match bytes at max_match_bytes, and the scan says so', async () => {
    const many = path.join(work, 'many.bin');
    writeFileSync(many, Buffer.from('MARK'.repeat(500)));
    const target = (await call(alice, 'register_artifact', { path: many })).artifact.digest;
    const scan = async (text: string, extra: Record<string, unknown>) => {
      const rules = await call(alice, 'register_rules', { name: 'bounds', sources: [{ name: 'b', text }] });
      expect(rules.error).toBeUndefined();
      const reply = await call(alice, 'scan_with_rules', {
        rules: rules.rules,
        artifact: target,
        wait_ms: 100_000,
        detail: 'summary',
        ...extra,
      });
      expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
      return { reply, rows: await allRows(alice, reply.evidence_id, 'matches') };
    };
    const capped = await scan('rule marker { strings: $m = "MARK" condition: $m }', { max_matches: 25 });
    expect(capped.reply.summary).toMatchObject({ status: 'capped', matches: 25 });
    expect(capped.reply.limitations.join(' ')).toMatch(/max_matches=25/);
    expect(capped.rows.map((r) => r.offset)).toEqual(Array.from({ length: 25 }, (_, i) => i * 4));

    const cut = await scan('rule long { strings: $l = { 4D 41 52 4B [396] 4D 41 52 4B } condition: $l }', {
      max_match_bytes: 8,
    });
    expect(cut.reply.summary.status).toBe('complete');
    expect(cut.rows[0]).toMatchObject({
      offset: 0,
      length: 404,
      data_truncated: true,
      data_hex: Buffer.from('MARKMARK').toString('hex'),
    });
  });

  it('a large rule set comes as an artifact; every bound refuses with its name before anything runs', async () => {
    // 12,000 rules (about 1.4 MB): over what a request may carry, so registered from an artifact.
    const big = path.join(work, 'big.yar');
    writeFileSync(
      big,
      Array.from(
        { length: 12_000 },
        (_, i) =>
          `rule r${i} : generated { meta: n = ${i} strings: $a = "needle-${i}-x" $h = { ${(i % 256).toString(16).padStart(2, '0')} ?? 5A 5A } condition: $a and $h }`,
      ).join('\n'),
    );
    const file = await call(alice, 'register_artifact', { path: big });
    const large = await call(alice, 'register_rules', { name: 'large set', artifact: file.artifact.digest });
    expect(large.error, JSON.stringify(large.error)).toBeUndefined();
    expect(large.rule_count).toBe(12_000);
    expect(large.rule_names[0]).toBe('large_set:r0');
    const inline = await call(alice, 'register_rules', {
      name: 'inline',
      sources: [{ name: 'big', text: readFileSync(big, 'utf8') }],
    }).catch((err: Error) => ({ thrown: err.message }));
    expect(JSON.stringify(inline)).toMatch(/DOSSIER_MAX_REQUEST_BYTES/);

    const huge = path.join(work, 'huge.yar');
    writeFileSync(huge, `// ${'x'.repeat(16 * 1024 * 1024)}\nrule r { condition: true }\n`);
    const over = await call(alice, 'register_rules', {
      name: 'huge',
      artifact: (await call(alice, 'register_artifact', { path: huge })).artifact.digest,
    });
    expect(over.error?.code).toBe('resource_constraint');
    expect(over.error.message).toMatch(/16777216 bytes a rule file may be/);
    const binary = await call(alice, 'register_rules', {
      name: 'binary',
      artifact: (await call(alice, 'register_artifact', { path: path.join(work, 'big.bin') })).artifact
        .digest,
    });
    expect(binary.error?.code).toBe('invalid_params');
    expect(binary.error.message).toMatch(/not UTF-8/);
    const otherTeams = await call(carol, 'register_rules', {
      name: 'theirs',
      artifact: file.artifact.digest,
    });
    expect(otherTeams.error?.code).toBe('not_found');

    const tooMany = await call(alice, 'register_rules', {
      name: 'many',
      sources: Array.from({ length: 65 }, (_, i) => ({
        name: `s${i}`,
        text: `rule r${i} { condition: true }`,
      })),
    });
    expect(tooMany.error?.code).toBe('invalid_params');
    expect(JSON.stringify(tooMany.error)).toMatch(/64/);
    const rules = await call(alice, 'register_rules', markers);
    const bad = await call(alice, 'scan_with_rules', {
      rules: rules.rules,
      artifact: rules.rules,
      timeout_s: 100_000,
    });
    expect(bad.error?.code).toBe('invalid_params');
    expect(JSON.stringify(bad.error)).toMatch(/timeout_s/);
  });
});
