// What moves in and out of a team's store besides tool results: artifacts
// (registered by path from the allowed roots or the team inbox, from an
// extraction's entry, or uploaded) and Evidence bundles (imported from the
// team's folder or an HTTP body, listed and served from its exports: bundleIntake.ts).
import { lstatSync, mkdirSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
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
import { findEvidence } from '../evidence/views.ts';
import { isUnder, openUnder } from '../sandbox/paths.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { outputReclaimed } from '../store/retained.ts';
import type { Store } from '../store/store.ts';
import { UPLOAD_LIMIT } from '../tools/ledger.ts';
import { BundleIntake } from './bundleIntake.ts';
import { fitList } from './lists.ts';

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
  /** Each team's inbox folder once made (by team); whether it is still a real folder, inboxOf asks each time. */
  private readonly inboxes = new Map<string, string>();
  private readonly bundles: BundleIntake;

  constructor(
    private readonly store: Pick<
      Store,
      'evidence' | 'unknowns' | 'artifacts' | 'blobs' | 'retained' | 'annotations' | 'functions'
    >,
    private readonly opts: IntakeOptions,
  ) {
    this.bundles = new BundleIntake(store, {
      bundleRoots: opts.bundleRoots ?? [],
      home: () => this.home(),
      maxJsonDepth: opts.maxJsonDepth,
    });
  }

  /**
   * Copies a file from under the allowed roots or the caller's inbox (a relative path is read there):
   * opened first, then checked, so a swapped link reads nothing.
   */
  async registerArtifact(caller: Principal, file: string, name?: string) {
    const inbox = this.inboxOf(caller);
    if (!path.isAbsolute(file)) {
      if (!inbox || file.split('/').includes('..'))
        throw new DossierError(
          'invalid_params',
          inbox
            ? `${JSON.stringify(file)} leaves your team's inbox: a relative path is read in it, and may not hold '..'.`
            : `${JSON.stringify(file)} is relative, and is read in your team's inbox, which this gateway has none of (DOSSIER_INBOX is unset, or your team's folder in it is not a real folder).`,
          'Pass an absolute path under DOSSIER_ALLOWED_ROOTS, or upload the file: POST /artifacts, or `npx dossier upload FILE`.',
          { path: file },
        );
      file = `${inbox}/${file}`;
    }
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

  /**
   * Where the caller's team's intake folder is (made on the first ask, 0700), or undefined when none
   * is configured: what whoami names. Not whether it is still a real folder: see inboxOf.
   */
  inboxFolder(caller: Principal): string | undefined {
    const known = this.inboxes.get(caller.team);
    if (known) return known;
    if (!this.opts.inbox || !/^[\w.-]+$/.test(caller.team) || /^\.+$/.test(caller.team)) return undefined;
    const folder = path.join(this.opts.inbox, caller.team);
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    this.inboxes.set(caller.team, folder);
    return folder;
  }

  /** The caller's team's intake folder if it is a real folder now (one removed is made again). */
  inboxOf(caller: Principal): string | undefined {
    const folder = this.inboxFolder(caller);
    if (!folder) return undefined;
    // A link planted in its place (at any time) would widen what register_artifact reads, to
    // another team's inbox: only a real folder counts.
    let st = lstatSync(folder, { throwIfNoEntry: false });
    if (!st) {
      mkdirSync(folder, { recursive: true, mode: 0o700 });
      st = lstatSync(folder);
    }
    return st.isDirectory() ? folder : undefined;
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

  /** Imports a bundle from the caller's team folder under a bundle root (import_evidence_bundle). */
  importBundle(caller: Principal, file: string) {
    return this.bundles.importBundle(caller, file);
  }

  /** Verifies a bundle's text and retains its Evidence for the caller's team, atomically (POST /bundles). */
  importBundleText(caller: Principal, text: string) {
    return this.bundles.importBundleText(caller, text);
  }

  /** The caller's team's exported bundles, newest first (GET /bundles). */
  listBundles(caller: Principal) {
    return this.bundles.listBundles(caller);
  }

  /** Opens one of the caller's team's exported bundles by name (GET /bundles/NAME). */
  openBundle(caller: Principal, name: string) {
    return this.bundles.openBundle(caller, name);
  }
}
