// Output kept as it arrives, up to a cap: what a captured program or a device
// wrote, with the full size and SHA-256 of everything even past the cap.
import { createHash } from 'node:crypto';

/** A stream's bytes up to a cap, with its full size and digest. */
export class CappedOutput {
  readonly chunks: Buffer[] = [];
  retained = 0;
  total = 0;
  private readonly hash = createHash('sha256');
  constructor(private readonly cap: number) {}

  push(chunk: Buffer) {
    this.total += chunk.length;
    this.hash.update(chunk);
    const room = this.cap - this.retained;
    if (room > 0) {
      const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.chunks.push(kept);
      this.retained += kept.length;
    }
  }

  private digest: string | undefined;

  /** Size, what was kept, and the SHA-256 of everything (the stream is complete once this is asked). */
  describe() {
    this.digest ??= this.hash.digest('hex');
    return {
      bytes: this.total,
      retained_bytes: this.retained,
      truncated: this.total > this.retained,
      sha256: this.digest,
    };
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}
