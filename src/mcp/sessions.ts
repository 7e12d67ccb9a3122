// The MCP sessions of one gateway replica. Each is recorded in the store with
// its client's initialize request, so another replica (or this one after a
// restart) resumes it by replaying that request, and a principal's session cap
// counts every replica's sessions. Every request reads its session's row (in
// the token lookup's statement), so a session closed by another replica
// (its principal's cap, DELETE) or expired ends here too. When each was last
// seen is kept here and written to the store in one statement at most every
// SEEN_WRITE_MS, and before this replica opens a session (the cap closes the
// least recently seen): a busy session costs the store no write per request.
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { randomUUID } from 'node:crypto';
import { toToolError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import type { Gateway } from '../gateway/gateway.ts';
import type { SessionRecord, SessionStore } from '../store/sessions.ts';
import { createMcpServer, type SessionToolsets } from './server.ts';
import { normalizeToolsets, type Toolset } from '../tools/toolsets.ts';
import { splitList } from '../store/tokens.ts';

export interface Session {
  /** Web-standard: http.ts hands it requests and writes its responses (webResponse.ts). */
  transport: WebStandardStreamableHTTPServerTransport;
  server: ReturnType<typeof createMcpServer>;
  principal: Principal;
  /** What its tools/list shows: chosen at initialize, grown by enable_toolsets (on any replica). */
  toolsets: SessionToolsets;
  lastSeen: number;
}

export interface SessionLimits {
  /** Sessions idle this long are closed. */
  idleMs: number;
  /** Sessions open at once on this replica. */
  maxSessions: number;
  /** Sessions one principal holds; the least recently used one goes first. */
  perPrincipal: number;
  store?: SessionStore;
}

const who = (p: Principal) => `${p.team}/${p.principal}`;

/** How long a session's last-seen time may wait here before the store has it. */
export const SEEN_WRITE_MS = 250;

/** Largest record of a client's initialize kept to resume its session (capabilities and client info). */
export const MAX_INIT_BYTES = 16 * 1024;

/**
 * What a session keeps of its client's initialize request: the protocol
 * version, capabilities and client info, nothing else; undefined when that
 * is larger than MAX_INIT_BYTES (the initialize is then refused).
 */
export function initRecord(params: unknown): string | undefined {
  const p = (params ?? {}) as Record<string, unknown>;
  const kept = JSON.stringify({
    protocolVersion: p.protocolVersion,
    capabilities: p.capabilities ?? {},
    clientInfo: p.clientInfo,
  });
  return Buffer.byteLength(kept) <= MAX_INIT_BYTES ? kept : undefined;
}

export class Sessions {
  private readonly held = new Map<string, Session>();
  private readonly resuming = new Map<string, Promise<Session | 'busy' | undefined>>();
  // Sessions being opened count from the moment they are admitted: a burst of
  // initialize requests cannot pass the caps before any of them is recorded.
  private readonly opening = new Map<string, number>();
  /** Sessions seen since their last-seen time was last written, and when. */
  private readonly unwritten = new Map<string, { team: string; principal: string; at: number }>();
  private writeTimer: NodeJS.Timeout | undefined;
  /** The write of last-seen times under way (one at a time). */
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly gateway: Gateway,
    private readonly limits: SessionLimits,
  ) {}

  get size(): number {
    return this.held.size;
  }

  all(): Session[] {
    return [...this.held.values()];
  }

  /**
   * Makes room for a session of `p`: without a store, a principal at its cap
   * loses its least recently used session here (with one, the store's cap
   * does, over every replica); a full replica takes one from the principal
   * that holds the most. No principal's sessions can crowd out another's.
   * False when too many are being opened at once; else call `done` after.
   */
  admit(p: Principal, isNew = true): boolean {
    const { perPrincipal, maxSessions } = this.limits;
    const mine = [...this.held]
      .filter(([, s]) => who(s.principal) === who(p))
      .sort((a, b) => a[1].lastSeen - b[1].lastSeen);
    while (
      isNew &&
      !this.limits.store &&
      mine.length > 0 &&
      mine.length + (this.opening.get(who(p)) ?? 0) >= perPrincipal
    )
      this.evict(mine.shift()![0]);
    while (this.held.size > 0 && this.held.size + this.totalOpening() >= maxSessions) {
      const byPrincipal = new Map<string, [string, Session][]>();
      for (const entry of this.held) {
        const k = who(entry[1].principal);
        byPrincipal.set(k, [...(byPrincipal.get(k) ?? []), entry]);
      }
      const heaviest = [...byPrincipal.values()].sort((a, b) => b.length - a.length)[0]!;
      this.evict(heaviest.sort((a, b) => a[1].lastSeen - b[1].lastSeen)[0]![0]);
    }
    const mineOpening = this.opening.get(who(p)) ?? 0;
    if (mineOpening >= perPrincipal || this.totalOpening() >= maxSessions) return false;
    this.opening.set(who(p), mineOpening + 1);
    return true;
  }

  done(p: Principal) {
    const n = (this.opening.get(who(p)) ?? 1) - 1;
    if (n > 0) this.opening.set(who(p), n);
    else this.opening.delete(who(p));
  }

  /**
   * A new session of `p` listing `toolsets`, for an initialize whose params
   * `initRecord` accepted; recorded once it has its id.
   */
  open(p: Principal, init: string, toolsets: readonly Toolset[]): Promise<Session> {
    return this.make(p, undefined, toolsets, async (id) => {
      if (!this.limits.store) return;
      // The cap closes the least recently seen: what this replica has seen counts.
      await this.writeSeen();
      const closed = await this.limits.store.open(
        { id, team: p.team, principal: p.principal, init, toolsets },
        this.limits.perPrincipal,
        Date.now() - this.limits.idleMs,
      );
      for (const old of closed) this.evict(old, false);
    });
  }

  /**
   * Since when a session must have been seen to be live, when sessions are
   * recorded in the store (a request reads its session's row there); else
   * undefined.
   */
  liveSince(): number | undefined {
    return this.limits.store && Date.now() - this.limits.idleMs;
  }

  /**
   * The session `id` of `p`: held here, or recorded by another replica and
   * resumed here (once, however many requests ask at the same moment);
   * 'busy' when this replica has no room to resume it now. `live` is what
   * the store said of the session's row with the caller's token, since
   * `liveSince()` (http.ts reads both in one statement), with the toolsets
   * the row lists (another replica may have enabled more); else it is read
   * here. `toolsets` is what a session resumed from a row that names none lists.
   */
  async find(
    id: string,
    p: Principal,
    live: { live: boolean; toolsets?: string[] } | undefined,
    toolsets: readonly Toolset[],
  ): Promise<Session | 'busy' | undefined> {
    const held = this.held.get(id);
    if (held && who(held.principal) !== who(p)) return undefined;
    const store = this.limits.store;
    if (!store) return held && this.seen(id, held);
    const liveSince = Date.now() - this.limits.idleMs;
    if (held) {
      if (!(live?.live ?? (await store.isLive(id, p, liveSince)))) {
        this.evict(id, false);
        return undefined;
      }
      if (live?.toolsets) held.toolsets.listed = normalizeToolsets(live.toolsets);
      return this.seen(id, held);
    }
    let resuming = this.resuming.get(id);
    if (!resuming) {
      resuming = store
        .get(id, p, liveSince)
        .then((row) => (row ? this.resume(row, p, toolsets) : undefined))
        .finally(() => this.resuming.delete(id));
      this.resuming.set(id, resuming);
    }
    const resumed = await resuming;
    // A request of another principal that raced in with the same id gets nothing of it.
    if (resumed === 'busy' || !resumed) return resumed;
    if (who(resumed.principal) !== who(p)) return undefined;
    return this.seen(id, resumed);
  }

  /** Notes that session `id` was seen now, here and (within SEEN_WRITE_MS) in the store; returns it. */
  private seen(id: string, session: Session): Session {
    session.lastSeen = Date.now();
    if (!this.limits.store) return session;
    const { team, principal } = session.principal;
    this.unwritten.set(id, { team, principal, at: session.lastSeen });
    if (!this.writeTimer) {
      this.writeTimer = setTimeout(() => void this.writeSeen(), SEEN_WRITE_MS);
      this.writeTimer.unref();
    }
    return session;
  }

  /**
   * Writes the last-seen times waiting here, after any write already under
   * way (so an open that follows counts every one). A write that fails puts
   * its times back for the next, unless newer ones came meanwhile.
   */
  writeSeen(): Promise<void> {
    clearTimeout(this.writeTimer);
    this.writeTimer = undefined;
    const store = this.limits.store;
    if (!store) return this.writing;
    this.writing = this.writing.then(async () => {
      if (this.unwritten.size === 0) return;
      const marks = [...this.unwritten].map(([id, m]) => ({ id, ...m }));
      this.unwritten.clear();
      try {
        await store.markSeen(marks, this.limits.idleMs);
      } catch {
        for (const { id, ...m } of marks) if (!this.unwritten.has(id)) this.unwritten.set(id, m);
      }
    });
    return this.writing;
  }

  /** Closes a session here and, unless it was closed elsewhere already, in the store (its client must initialize again). */
  evict(id: string, inStoreToo = true) {
    this.unwritten.delete(id);
    if (inStoreToo) this.limits.store?.close(id).catch(() => undefined);
    const s = this.held.get(id);
    if (!s) return;
    this.held.delete(id);
    s.transport.close().catch(() => undefined);
  }

  /** Closes what has been idle here; the store forgets what no replica has seen within the idle time. */
  reap() {
    const cutoff = Date.now() - this.limits.idleMs;
    // Idle here is not idle everywhere: its client may have moved to another replica.
    for (const [id, s] of this.held) if (s.lastSeen < cutoff) this.evict(id, false);
    this.limits.store?.sweep(cutoff).catch(() => undefined);
  }

  /** Closes every session here, keeping them in the store for another replica, or this one restarted. */
  async closeAll() {
    await this.writeSeen();
    await Promise.allSettled(this.all().map((s) => s.transport.close()));
    this.held.clear();
  }

  private totalOpening() {
    let n = 0;
    for (const v of this.opening.values()) n += v;
    return n;
  }

  private async make(
    p: Principal,
    id: string | undefined,
    listed: readonly Toolset[],
    recorded: (id: string) => Promise<void>,
  ): Promise<Session> {
    const store = this.limits.store;
    const toolsets: SessionToolsets = {
      listed,
      // Recorded with the session, so a replica that resumes it (or already holds it) lists the same.
      record: async (next) => {
        const sid = session.transport.sessionId;
        if (store && sid && !(await store.setToolsets(sid, p, next)))
          throw new Error('This session is no longer recorded; initialize a new one.');
      },
    };
    const server = createMcpServer(
      this.gateway,
      (extra) => extra?.principal as Principal | undefined,
      toolsets,
    );
    const session: Session = {
      transport: new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => id ?? randomUUID(),
        onsessioninitialized: async (sid) => {
          this.held.set(sid, session);
          try {
            await recorded(sid);
          } catch (err) {
            // The SDK answers with what is thrown here: never the store's own text.
            this.held.delete(sid);
            throw new Error(toToolError(err).message);
          }
        },
        // DELETE /mcp: the client ends the session everywhere.
        onsessionclosed: (sid) => this.evict(sid),
      }),
      server,
      principal: p,
      toolsets,
      lastSeen: Date.now(),
    };
    session.transport.onclose = () => {
      const sid = session.transport.sessionId;
      if (sid && this.held.get(sid) === session) this.held.delete(sid);
    };
    await server.connect(session.transport);
    return session;
  }

  /**
   * Rebuilds a recorded session here by replaying its client's initialize
   * request to a new server, listing the toolsets its row records (`toolsets`
   * for a row recorded before sessions kept theirs).
   */
  private async resume(
    row: SessionRecord,
    p: Principal,
    toolsets: readonly Toolset[],
  ): Promise<Session | 'busy' | undefined> {
    if (!this.admit(p, false)) return 'busy';
    try {
      const recorded = splitList(row.toolsets);
      const listed = recorded ? normalizeToolsets(recorded) : toolsets;
      const session = await this.make(p, row.id, listed, async () => undefined);
      const init = JSON.parse(row.init) as { protocolVersion?: string };
      const replay = async (message: Record<string, unknown>, headers: Record<string, string> = {}) => {
        const response = await session.transport.handleRequest(
          new Request('http://gateway/mcp', {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              ...headers,
            },
            body: JSON.stringify(message),
          }),
          { parsedBody: message },
        );
        await response.text();
        return response.status;
      };
      const resumed =
        (await replay({ jsonrpc: '2.0', id: `resume-${row.id}`, method: 'initialize', params: init })) ===
          200 && this.held.get(row.id) === session;
      if (!resumed) {
        await session.transport.close();
        return undefined;
      }
      await replay(
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        {
          'mcp-session-id': row.id,
          ...(init.protocolVersion ? { 'mcp-protocol-version': init.protocolVersion } : {}),
        },
      );
      return session;
    } finally {
      this.done(p);
    }
  }
}
