// What an HTTP request carries, read the one way every route of dossier reads it:
// its bearer token, its cookies, and its body within a size and a time bound.
import type { IncomingMessage } from 'node:http';

/** The token of an `Authorization: Bearer …` header (at most 512 characters), or undefined. */
export function bearerToken(req: IncomingMessage): string | undefined {
  return /^Bearer\s+(\S{1,512})$/i.exec(req.headers.authorization ?? '')?.[1];
}

/** Every value the request's cookies give `name`, in the order the browser sent them. */
export function cookieValues(req: IncomingMessage, name: string): string[] {
  return (req.headers.cookie ?? '')
    .split(';')
    .map((part) => part.trim().split('='))
    .filter(([key, value]) => key === name && value)
    .map(([, value]) => value!);
}

/** The request's body, or why it was not read: over `limit` bytes, or not there within `timeoutMs`. */
export function readBody(
  req: IncomingMessage,
  limit: number,
  timeoutMs: number,
): Promise<Buffer | 'too_large' | 'too_slow'> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > limit) {
      req.resume();
      return resolve('too_large');
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (why: 'too_large' | 'too_slow') => {
      clearTimeout(timer);
      req.removeAllListeners('data');
      req.resume();
      resolve(why);
    };
    const timer = setTimeout(() => stop('too_slow'), timeoutMs);
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return stop('too_large');
      chunks.push(chunk);
    });
    req.on('end', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
