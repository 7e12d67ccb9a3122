// Evidence bundles in and out of a team's store: imported from the team's
// folder under a bundle root or from an HTTP body (verified, then retained
// whole), listed and served from the team's exports folder, and fetched there
// from the store when another host exported them.
import { randomUUID } from 'node:crypto';
import { copyFile, lstat, mkdir, readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { DossierError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import { verifyArtifact } from '../evidence/artifacts.ts';
import { readBundle } from '../evidence/bundles.ts';
import { openUnder } from '../sandbox/paths.ts';
import type { Store } from '../store/store.ts';
import { BUNDLE_LIMITS } from '../tools/ledger.ts';

/** A bundle's file name in an exports folder (export_evidence_bundle writes bundle-<sha256>.json). */
const BUNDLE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.json$/;

export interface BundleIntakeOptions {
  /** Folders bundles are imported from. */
  bundleRoots: string[];
  /** DOSSIER_HOME, where the exports folders live (throws when the intake was built without it). */
  home(): string;
  /** How deeply a bundle may nest arrays and objects (DOSSIER_MAX_JSON_DEPTH). */
  maxJsonDepth?: number;
}

export class BundleIntake {
  constructor(
    private readonly store: Pick<Store, 'evidence' | 'unknowns' | 'blobs' | 'annotations' | 'functions'>,
    private readonly opts: BundleIntakeOptions,
  ) {}

  /**
   * Imports a bundle from the caller's team folder under a bundle root
   * (`<root>/<team>/…`, where exports land); any other path, another team's
   * included, is not_found. Every record must be the caller's team's.
   */
  async importBundle(caller: Principal, file: string) {
    const teamRoots = this.opts.bundleRoots.map((root) => path.join(root, caller.team));
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
    const bundle = readBundle(text, { maxDepth: this.opts.maxJsonDepth });
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
    // All of it in one transaction: the Evidence, its unknowns, and the team's knowledge of those
    // artifacts, annotations with their history and the links its diffs made (an import again
    // changes nothing; a history that went another way here is kept).
    const { imported, present, then } = await this.store.evidence.importAll(
      caller.team,
      built,
      async (tx) => {
        const unknowns = await this.store.unknowns.importIn(tx, caller.team, bundle.unknowns);
        const carried = await this.store.annotations.importCarriedIn(
          tx,
          caller.team,
          caller.principal,
          annotations,
        );
        if (links.length) await this.store.functions.recordLinksIn(tx, caller.team, links);
        return { unknowns, carried };
      },
    );
    const carried = then!.carried;
    return {
      imported,
      already_present: present,
      evidence_ids: built.map((b) => b.record.evidence_id),
      unknowns: then!.unknowns,
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
    const file = await verifyArtifact(this.opts.home(), known.digest, undefined, shared);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const staging = path.join(dir, `.${name}.${randomUUID()}`);
    await copyFile(file, staging);
    await rename(staging, path.join(dir, name));
    return true;
  }

  private exportsOf(caller: Principal) {
    return path.join(this.opts.home(), 'exports', caller.team);
  }
}
