// What moves in and out of a team's store besides tool results: artifacts
// (registered by path from the allowed roots or the team inbox, from an
// extraction's entry, or uploaded) and Evidence bundles (imported from the
// team's folder or an HTTP body, listed and served from its exports).
import { lstatSync, mkdirSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { copyFile, lstat, mkdir, readdir, readFile, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { DossierError } from '../domain/errors.ts';
import type { ArtifactProvenance, Principal } from '../domain/types.ts';
import {
  detectType,
  fetchOwned,
  storeArtifact,
  storeArtifactFile,
  verifyArtifact,
  outputFolder,
} from '../evidence/artifacts.ts';
import { readBundle } from '../evidence/bundles.ts';
import { findEvidence } from '../evidence/views.ts';
import { isUnder, openUnder } from '../sandbox/paths.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { outputReclaimed } from '../store/retained.ts';
import type { Store } from '../store/store.ts';
import { BUNDLE_LIMITS, UPLOAD_LIMIT } from '../tools/ledger.ts';
import { fitList } from './lists.ts';

/** A bundle's file name in an exports folder (export_evidence_bundle writes bundle-<sha256>.json). */
const BUNDLE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.json$/;

/** Tools whose Evidence lists written entries that register_artifact can take. */
const EXTRACTING_TOOLS = ['extract_artifact', 'extract_firmware'];

export interface IntakeOptions {
  replyBudgetBytes: number;
  /** Folders bundles are imported from. */
  bundleRoots?: string[];
  /** Where the artifact directory lives, the folders artifacts are registered from, and the upload cap. */
  home?: string;
  allowedRoots?: string[];
  /** Per-team intake folders, <inbox>/<team>/, read besides the allowed roots. */
  inbox?: string;
  uploadLimit?: number;
  /** How deeply a bundle may nest arrays and objects (DOSSIER_MAX_JSON_DEPTH). */
  maxJsonDepth?: number;
  /** Where helpers that read untrusted bytes (file) run. */
  sandbox?: Sandbox;
  /** The interpreter dossier's Python environments are made with (the rule compiler's). */
  python?: string;
}

export class Intake {
  private readonly bundleRoots: string[];
  private readonly inboxes = new Set<string>();

  constructor(
    private readonly store: Pick<
      Store,
      'evidence' | 'unknowns' | 'artifacts' | 'blobs' | 'retained' | 'annotations' | 'functions'
    >,
    private readonly opts: IntakeOptions,
  ) {
    this.bundleRoots = opts.bundleRoots ?? [];
  }

  /** Copies a file from under the allowed roots: opened first, then checked, so a swapped link reads nothing. */
  async registerArtifact(caller: Principal, file: string, name?: string) {
    const inbox = this.inboxOf(caller);
    const opened = await openUnder(
      file,
      [...(this.opts.allowedRoots ?? []), ...(inbox ? [inbox] : [])],
      `DOSSIER_ALLOWED_ROOTS, or your team's inbox ${inbox ?? '(none)'}`,
    );
    try {
      const stored = await storeArtifactFile(
        this.home(),
        opened.handle.fd,
        this.opts.uploadLimit ?? UPLOAD_LIMIT.default,
        this.store.blobs,
        caller.team,
      );
      return await this.recordArtifact(caller, stored, name ?? path.basename(file), `path:${opened.real}`);
    } finally {
      await opened.handle.close();
    }
  }

  /**
   * Registers one written entry of an extraction (by its Evidence and its path
   * in the manifest) without a download and upload: the file is read from the
   * extraction's output, and its bytes must still hash to the manifest's sha256.
   */
  async registerExtracted(caller: Principal, evidenceId: string, entry: string, name?: string) {
    const record = await findEvidence(this.store.evidence, caller.team, evidenceId);
    const named = record.summary.output;
    if (!EXTRACTING_TOOLS.includes(record.tool) || typeof named !== 'string' || !record.collections.entries) {
      throw new DossierError(
        'invalid_params',
        `Evidence ${evidenceId} is ${EXTRACTING_TOOLS.includes(record.tool) ? 'a failed extraction, which left no output' : `a ${record.tool} result, not an extraction`}.`,
        'Pass the evidence_id of a succeeded extract_artifact or extract_firmware launch, and the path of one of its written entries.',
        { evidence_id: evidenceId, tool: record.tool },
      );
    }
    const { rows } = await this.store.evidence.page({
      evidenceId,
      collection: 'entries',
      total: record.collections.entries.rows,
      where: { path: [entry] },
      offset: 0,
      limit: 1,
    });
    const row = rows[0]?.row as
      { path: string; type: string; status: string; sha256: string | null } | undefined;
    if (!row || row.type !== 'file' || row.status !== 'written' || !row.sha256) {
      throw new DossierError(
        'not_found',
        row
          ? `${entry} in ${evidenceId} is ${row.status === 'written' ? `a ${row.type}` : `${row.status}, not written`}; only written files can be registered.`
          : `${evidenceId} has no entry at ${JSON.stringify(entry)}.`,
        'Page the entries collection (inspect_analysis_view, where {status: ["written"], type: ["file"]}) and pass a path exactly as listed.',
        { evidence_id: evidenceId, entry },
      );
    }
    // The output must be one of this team's extractions and the entry inside it, whatever the
    // record says (an imported bundle's Evidence is written by whoever made the bundle).
    const root = path.join(this.home(), 'extractions', caller.team);
    const output = outputFolder(this.home(), named);
    const parts = row.path.split('/').filter((p) => p !== '' && p !== '.');
    const inside = isUnder(output, root) && !parts.includes('..');
    const file = path.join(output, ...parts);
    const recordAs = (stored: { digest: string; size: number; file: string }) =>
      this.recordArtifact(caller, stored, name ?? path.posix.basename(row.path), `extracted:${evidenceId}`, {
        parent_artifact: record.target?.digest ?? null,
        evidence_id: evidenceId,
        path: row.path,
      });
    const opened = await openUnder(file, inside ? [output] : [], 'the extraction output').catch(
      (err: unknown) => err as Error,
    );
    if (opened instanceof Error) {
      // Extracted on another host: its worker published the bytes to the shared store, for this team.
      const digest = `sha256:${row.sha256}`;
      const fetched = await fetchOwned(
        this.home(),
        digest,
        caller.team,
        this.store.blobs,
        this.opts.uploadLimit ?? UPLOAD_LIMIT.default,
      );
      if (fetched) return recordAs({ digest, size: (await stat(fetched)).size, file: fetched });
      const reclaimed = await this.store.retained.reclaimed(caller.team, [output]);
      if (reclaimed) throw outputReclaimed(evidenceId, reclaimed.reclaimed_at, { details: { entry } });
      throw new DossierError(
        'not_found',
        `The file of ${entry} is no longer in the extraction's output${opened instanceof DossierError && opened.code === 'not_found' ? '' : ' (it could not be opened there)'}.`,
        'Extract the archive again (with a new idempotency_key), then register from the new Evidence.',
        { evidence_id: evidenceId, entry },
      );
    }
    try {
      const stored = await storeArtifactFile(
        this.home(),
        opened.handle.fd,
        this.opts.uploadLimit ?? UPLOAD_LIMIT.default,
        this.store.blobs,
        caller.team,
      );
      if (stored.digest !== `sha256:${row.sha256}`) {
        throw new DossierError(
          'integrity_error',
          `The extracted file ${entry} no longer matches the sha256 its extraction recorded; it was not registered.`,
          'Extract the archive again (with a new idempotency_key) and register from the new Evidence.',
          { evidence_id: evidenceId, entry, recorded: `sha256:${row.sha256}`, actual: stored.digest },
        );
      }
      return await recordAs(stored);
    } finally {
      await opened.handle.close();
    }
  }

  /**
   * An entry of one of the team's extractions is usable by the digest its row shows: a digest
   * not registered for the team is registered here from the newest extraction that wrote it
   * (as register_artifact {evidence_id, entry} would). Whether the team has it now.
   */
  async adoptExtracted(caller: Principal, digest: string): Promise<boolean> {
    if (await this.store.artifacts.get(caller.team, digest)) return true;
    const found = await this.store.evidence.withRowKey(caller.team, EXTRACTING_TOOLS, {
      collection: 'entries',
      field: 'artifact',
      value: digest,
      limit: 4,
    });
    for (const evidenceId of found) {
      const { rows } = await this.store.evidence.page({
        evidenceId,
        collection: 'entries',
        total: Number.MAX_SAFE_INTEGER,
        where: { artifact: [digest], status: ['written'] },
        offset: 0,
        limit: 1,
      });
      const entry = (rows[0]?.row as { path?: string } | undefined)?.path;
      if (!entry) continue;
      // An output reclaimed or gone on this host: the next extraction that wrote it may still have it.
      const adopted = await this.registerExtracted(caller, evidenceId, entry).catch(() => undefined);
      if (adopted) return true;
    }
    return false;
  }

  /** The caller's team's intake folder (created on first ask, 0700), or undefined when none is configured. */
  inboxOf(caller: Principal): string | undefined {
    if (!this.opts.inbox || !/^[\w.-]+$/.test(caller.team) || /^\.+$/.test(caller.team)) return undefined;
    const folder = path.join(this.opts.inbox, caller.team);
    if (!this.inboxes.has(folder)) {
      mkdirSync(folder, { recursive: true, mode: 0o700 });
      // A link planted in its place would widen what register_artifact reads: only a real folder counts.
      const st = lstatSync(folder);
      if (!st.isDirectory() || st.isSymbolicLink()) return undefined;
      this.inboxes.add(folder);
    }
    return folder;
  }

  async uploadArtifact(caller: Principal, body: Readable, name: string | undefined) {
    const stored = await storeArtifact(
      this.home(),
      body,
      this.opts.uploadLimit ?? UPLOAD_LIMIT.default,
      this.store.blobs,
      caller.team,
    );
    return this.recordArtifact(caller, stored, name ?? null, 'upload');
  }

  async listArtifacts(caller: Principal, filter: { cursor?: string; limit: number }) {
    return fitList(
      'artifacts',
      await this.store.artifacts.list(caller.team, filter),
      this.opts.replyBudgetBytes,
    );
  }

  private async recordArtifact(
    caller: Principal,
    stored: { digest: string; size: number; file: string },
    name: string | null,
    origin: string,
    provenance: ArtifactProvenance | null = null,
  ) {
    const type = await detectType(this.sandbox(), stored.file);
    const { created, artifact } = await this.store.artifacts.put(caller.team, {
      digest: stored.digest,
      size: stored.size,
      ...type,
      name,
      origin,
      registered_by: caller.principal,
      created_at: new Date().toISOString(),
      provenance,
    });
    return { created, artifact };
  }

  /** The bytes of one of the team's artifacts, re-hashed, when it is at most `maxBytes` (a rule file). */
  async artifactBytes(caller: Principal, digest: string, maxBytes: number, what: string): Promise<Buffer> {
    const record = await this.store.artifacts.get(caller.team, digest);
    if (!record)
      throw new DossierError(
        'not_found',
        `No artifact ${digest} is registered for your team.`,
        'register_artifact (or POST /artifacts) first, then pass the digest it returns.',
        { artifact: digest },
      );
    if (record.size > maxBytes)
      throw new DossierError(
        'resource_constraint',
        `The artifact is ${record.size} bytes, over the ${maxBytes} bytes ${what} may be.`,
        `Split it into files of at most ${maxBytes} bytes.`,
        { artifact: digest, size: record.size, limit: maxBytes },
      );
    return readFile(await verifyArtifact(this.home(), digest, undefined, this.store.blobs));
  }

  /** The sandbox and interpreter of helpers the gateway runs itself (the rule compiler). */
  helpers(): { sandbox: Sandbox; python: string } {
    return { sandbox: this.sandbox(), python: this.opts.python ?? '/usr/bin/python3' };
  }

  private sandbox(): Sandbox {
    if (!this.opts.sandbox) throw new Error('intake was built without a sandbox');
    return this.opts.sandbox;
  }

  private home(): string {
    if (!this.opts.home) throw new Error('intake was built without DOSSIER_HOME');
    return this.opts.home;
  }

  /**
   * Imports a bundle from the caller's team folder under a bundle root
   * (`<root>/<team>/…`, where exports land); any other path, another team's
   * included, is not_found. Every record must be the caller's team's.
   */
  async importBundle(caller: Principal, file: string) {
    const teamRoots = this.bundleRoots.map((root) => path.join(root, caller.team));
    const open = (at: string) =>
      openUnder(at, teamRoots, 'DOSSIER_BUNDLE_ROOTS').catch((err: unknown) => {
        if (err instanceof DossierError && err.code !== 'not_found' && err.code !== 'policy_denied')
          throw err;
        return undefined;
      });
    let opened = await open(file);
    // Exported on another host, whose exports folder the path names: the team's bundle of that
    // name comes from the store into this host's exports folder.
    const name = path.basename(file);
    if (
      !opened &&
      path.basename(path.dirname(file)) === caller.team &&
      (await this.fetchBundle(caller, name))
    )
      opened = await open(path.join(this.exportsOf(caller), name));
    if (!opened)
      throw new DossierError(
        'not_found',
        `No bundle of your team at ${file}.`,
        `Bundles are imported from your team's folder: ${teamRoots.join(', ')}/…; pass the path export_evidence_bundle reported, or copy the bundle there.`,
        { path: file },
      );
    let text: string;
    try {
      if (opened.stat.size > BUNDLE_LIMITS.bytes.max) {
        throw new DossierError(
          'resource_constraint',
          `${file} has ${opened.stat.size} bytes, more than a bundle may (${BUNDLE_LIMITS.bytes.max}).`,
          'Export smaller bundles.',
          { bytes: opened.stat.size },
        );
      }
      text = await opened.handle.readFile('utf8');
    } finally {
      await opened.handle.close();
    }
    return this.importBundleText(caller, text);
  }

  /** Verifies a bundle's text and retains its Evidence for the caller's team, atomically (POST /bundles, import_evidence_bundle). */
  async importBundleText(caller: Principal, text: string) {
    const bundle = readBundle(text, this.opts.maxJsonDepth);
    const { evidence: built, annotations, links } = bundle;
    const foreign = built.find((b) => b.record.team !== caller.team);
    if (foreign || (bundle.team !== null && bundle.team !== caller.team)) {
      throw new DossierError(
        'policy_denied',
        `The bundle holds ${foreign ? `Evidence of another team (${foreign.record.evidence_id})` : "another team's work"}; it was refused whole and nothing was imported.`,
        "Import only bundles of your team's Evidence.",
        foreign ? { evidence_id: foreign.record.evidence_id } : {},
      );
    }
    const { imported, present, then } = await this.store.evidence.importAll(caller.team, built, (tx) =>
      this.store.unknowns.importIn(tx, caller.team, bundle.unknowns),
    );
    // The team's knowledge of those artifacts comes along: annotations with their history, and the
    // links its diffs made (an import again changes nothing; a history that went another way here is kept).
    const carried = await this.store.annotations.importCarried(caller.team, caller.principal, annotations);
    if (links.length) await this.store.functions.recordLinks(caller.team, links);
    return {
      imported,
      already_present: present,
      evidence_ids: built.map((b) => b.record.evidence_id),
      unknowns: then,
      annotations: {
        ...carried,
        diverged: carried.diverged.length,
        diverged_ids: carried.diverged.slice(0, 100),
      },
    };
  }

  /** The caller's team's exported bundles, newest first (GET /bundles). */
  async listBundles(caller: Principal) {
    const dir = this.exportsOf(caller);
    const names = await readdir(dir).catch(() => [] as string[]);
    const found = await Promise.all(
      names
        .filter((n) => BUNDLE_NAME.test(n))
        .map(async (name) => {
          const st = await lstat(path.join(dir, name)).catch(() => null);
          return st?.isFile() ? { name, bytes: st.size, modified_at: st.mtime.toISOString() } : null;
        }),
    );
    // And what the team exported on other hosts, through the store.
    const here = new Set(found.map((b) => b?.name));
    const shared = (await this.store.blobs?.named(caller.team, 'bundle', 1_000)) ?? [];
    for (const b of shared)
      if (!here.has(b.name)) found.push({ name: b.name, bytes: b.bytes, modified_at: b.created_at });
    const bundles = found
      .filter((b) => b !== null)
      .sort((x, y) => y.modified_at.localeCompare(x.modified_at));
    return { bundles: bundles.slice(0, 1_000), total: bundles.length };
  }

  /** Opens one of the caller's team's exported bundles by name (GET /bundles/NAME); another team's is not_found. */
  async openBundle(caller: Principal, name: string) {
    const missing = new DossierError(
      'not_found',
      `Your team has no bundle named ${JSON.stringify(name.slice(0, 200))}.`,
      "GET /bundles lists your team's bundles; export_evidence_bundle writes new ones.",
      { name: name.slice(0, 200) },
    );
    if (!BUNDLE_NAME.test(name)) throw missing;
    const dir = this.exportsOf(caller);
    await this.fetchBundle(caller, name);
    return openUnder(path.join(dir, name), [dir], 'the exports folder').catch(() => {
      throw missing;
    });
  }

  /**
   * Brings one of the team's bundles, exported on another host, into this
   * host's exports folder from the store (its digest proven); whether it is
   * here now (false: the store has no bundle of that name of the team).
   */
  private async fetchBundle(caller: Principal, name: string): Promise<boolean> {
    const shared = this.store.blobs;
    if (!shared || !BUNDLE_NAME.test(name)) return false;
    const dir = this.exportsOf(caller);
    if (await lstat(path.join(dir, name)).catch(() => null)) return true;
    const known = await shared.lookup(caller.team, 'bundle', name);
    if (!known) return false;
    const file = await verifyArtifact(this.home(), known.digest, undefined, shared);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const staging = path.join(dir, `.${name}.${randomUUID()}`);
    await copyFile(file, staging);
    await rename(staging, path.join(dir, name));
    return true;
  }

  private exportsOf(caller: Principal) {
    return path.join(this.home(), 'exports', caller.team);
  }
}
