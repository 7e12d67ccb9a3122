import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CERT_PARTS, ensureTemporalCerts } from './certs.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-certs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a cluster's Temporal certificates", () => {
  it('are one CA’s: the server’s names temporal, each key is 0600, and the CA’s key is kept nowhere', async () => {
    const certs = await ensureTemporalCerts(dir, { hosts: ['10.0.0.7'] });
    expect(certs.made).toBe(true);
    const ca = new X509Certificate(readFileSync(certs.sets.server.ca));
    for (const part of CERT_PARTS) {
      const set = certs.sets[part];
      const cert = new X509Certificate(readFileSync(set.cert));
      expect(cert.verify(ca.publicKey)).toBe(true);
      expect(statSync(set.key).mode & 0o777).toBe(0o600);
      expect(statSync(path.dirname(set.key)).mode & 0o777).toBe(0o700);
    }
    const server = new X509Certificate(readFileSync(certs.sets.server.cert));
    expect(server.subjectAltName).toContain('DNS:temporal');
    expect(server.subjectAltName).toContain('IP Address:10.0.0.7');
    const keys = readdirSync(dir, { recursive: true })
      .map(String)
      .filter((f) => statSync(path.join(dir, f)).isFile())
      .filter((f) => readFileSync(path.join(dir, f), 'utf8').includes('PRIVATE KEY'));
    expect(keys.sort()).toEqual(['client/key.pem', 'server/key.pem', 'ui/key.pem']);
  });

  it('are kept while valid, and made again whole when one no longer matches or a host is new', async () => {
    const before = readFileSync(path.join(dir, 'client', 'cert.pem'), 'utf8');
    expect((await ensureTemporalCerts(dir, { hosts: ['10.0.0.7'] })).made).toBe(false);
    expect(readFileSync(path.join(dir, 'client', 'cert.pem'), 'utf8')).toBe(before);
    // Another key in place of the client's: the set is made again, with a new CA.
    writeFileSync(path.join(dir, 'client', 'key.pem'), readFileSync(path.join(dir, 'ui', 'key.pem')));
    expect((await ensureTemporalCerts(dir, { hosts: ['10.0.0.7'] })).made).toBe(true);
    const again = await ensureTemporalCerts(dir, { hosts: ['10.0.0.7', 'temporal.example'] });
    expect(again.made).toBe(true);
    expect(new X509Certificate(readFileSync(again.sets.server.cert)).subjectAltName).toContain(
      'DNS:temporal.example',
    );
  });
});
