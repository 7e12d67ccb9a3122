// Device credentials at rest: AES-256-GCM under a key derived (HKDF) from the
// cluster's payload key for this team and device, the device's identity bound
// in as authenticated data. Sealed by the gateway when a device is
// registered, opened only by the worker that connects; never returned.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { PayloadKey } from '../temporal/codec.ts';

function keyFor(key: PayloadKey, scope: string): Buffer {
  return Buffer.from(hkdfSync('sha256', key.secret, 'dossier', `device-credential:${scope}`, 32));
}

export function sealCredential(keys: PayloadKey[], team: string, deviceId: string, secret: string): string {
  const key = keys[0]!;
  const scope = `${team}/${deviceId}`;
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFor(key, scope), iv);
  cipher.setAAD(Buffer.from(scope));
  const sealed = Buffer.concat([iv, cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return `v1:${key.id}:${sealed.toString('base64')}`;
}

export function openCredential(keys: PayloadKey[], team: string, deviceId: string, sealed: string): string {
  const [version, id, data] = sealed.split(':');
  const key = keys.find((k) => k.id === id);
  if (version !== 'v1' || !key || !data)
    throw new Error(`the credential of device ${deviceId} cannot be opened with the configured keys`);
  const scope = `${team}/${deviceId}`;
  const bytes = Buffer.from(data, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', keyFor(key, scope), bytes.subarray(0, 12));
  decipher.setAAD(Buffer.from(scope));
  decipher.setAuthTag(bytes.subarray(bytes.length - 16));
  return Buffer.concat([decipher.update(bytes.subarray(12, bytes.length - 16)), decipher.final()]).toString(
    'utf8',
  );
}
