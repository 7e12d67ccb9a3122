// The extraction tree View: an extraction's entries as a folding tree, nested
// archives opened under the archive they came from (P.extracted/ under P),
// with types, sizes, and refused entries with their reasons. Clicking an entry
// reads its row again through inspect_analysis_view (filtered by its path).
// Rows come from the launch's Evidence, paged; a running launch is awaited.
'use strict';
(function () {
  var app = document.getElementById('app');
  var args = {};
  app.innerHTML = '';
  var title = app.appendChild(h('h1', { text: 'Extraction tree' }));
  var status = app.appendChild(h('p', { class: 'status', text: 'Waiting for the extraction…' }));
  var layout = app.appendChild(h('div', { class: 'layout' }));
  var table = layout.appendChild(h('div', { class: 'graph' }));
  var detail = layout.appendChild(h('div', { class: 'panel', id: 'row' }));
  var evidenceId = null;

  function finished(reply) {
    if (reply.error) return Promise.reject(reply.error);
    if (reply.status !== 'running') return Promise.resolve(reply);
    status.textContent = 'The extraction is running…';
    return dossierHost
      .call('await_launch', { idempotency_key: args.idempotency_key, wait_ms: 30000 })
      .then(finished);
  }

  function node(name, entry) {
    return { name: name, entry: entry || null, children: new Map(), open: true };
  }

  /** The tree of entries by path; an archive's P.extracted/ folder is folded into the archive's own node. */
  function treeOf(entries) {
    var root = node('', null);
    var written = new Set(
      entries.map(function (e) {
        return e.path;
      }),
    );
    function place(parts, entry) {
      var at = root;
      var prefix = '';
      parts.forEach(function (part, i) {
        var full = prefix ? prefix + '/' + part : part;
        var archive = part.slice(-10) === '.extracted' ? full.slice(0, -10) : null;
        var key = archive && written.has(archive) ? part.slice(0, -10) : part;
        if (!at.children.has(key)) at.children.set(key, node(key, null));
        at = at.children.get(key);
        if (i === parts.length - 1 && entry) at.entry = entry;
        prefix = full;
      });
    }
    entries.forEach(function (e) {
      if (e.status === 'refused' || !e.path) {
        // A refused path is never a place in the tree: it is listed under the archive that held it.
        var holder = root;
        if (e.parent) {
          e.parent.split('/').forEach(function (p) {
            var key = p.slice(-10) === '.extracted' ? p.slice(0, -10) : p;
            holder = holder.children.get(key) || holder.children.get(p) || holder;
          });
        }
        holder.children.set(
          '\u0000' + e.occurrence + (e.path || e.inner_path),
          node(e.inner_path || e.path || '?', e),
        );
      } else place(e.path.split('/'), e);
    });
    return root;
  }

  function select(tr, entry) {
    Array.prototype.forEach.call(table.querySelectorAll('tr.selected'), function (r) {
      r.classList.remove('selected');
    });
    tr.classList.add('selected');
    detail.textContent = 'Reading ' + entry.path + '…';
    dossierHost
      .call('inspect_analysis_view', {
        evidence_id: evidenceId,
        view: { kind: 'page', collection: 'entries', where: { path: [entry.path] }, limit: 5 },
      })
      .then(function (reply) {
        if (reply.error) throw reply.error;
        var row = reply.rows[0];
        detail.textContent = row ? JSON.stringify(row.row, null, 2) : 'No row has this path.';
        app.dataset.selected = entry.path;
        dossierHost.reportSize();
      })
      .catch(function (err) {
        detail.textContent = 'inspect_analysis_view: ' + ((err && err.message) || 'failed');
      });
  }

  function rows(tree, archives) {
    var body = h('tbody');
    var formats = new Map(
      archives.map(function (a) {
        return [a.path, a];
      }),
    );
    function walk(n, depth) {
      var kids = Array.from(n.children.values()).sort(function (a, b) {
        return (b.children.size > 0) - (a.children.size > 0) || (a.name < b.name ? -1 : 1);
      });
      kids.forEach(function (k) {
        var e = k.entry || {};
        var archive = formats.get(e.path);
        var cls =
          'entry' +
          (e.status === 'refused' ? ' refused' : '') +
          (archive && archive.status === 'failed' ? ' failed' : '');
        var tags = [];
        if (archive || e.nested_archive)
          tags.push(
            h('span', {
              class: 'tag archive',
              text: archive ? archive.format + ' · ' + archive.status : 'archive',
            }),
          );
        if (e.status === 'refused')
          tags.push(h('span', { class: 'tag refused', text: 'refused: ' + (e.reason || '') }));
        var twisty = h('span', { class: 'twisty', text: k.children.size ? (k.open ? '▾' : '▸') : '' });
        var tr = h('tr', { class: cls, 'data-path': e.path || '', 'data-status': e.status || 'folder' }, [
          h('td', { style: 'padding-left:' + (6 + depth * 16) + 'px' }, [
            twisty,
            k.name + (e.type === 'directory' || (!k.entry && k.children.size) ? '/' : '') + ' ',
          ]),
          h('td', {}, tags),
          h('td', { text: e.detected_type || e.type || (k.children.size ? 'directory' : '') }),
          h('td', { class: 'num', text: formatBytes(e.size) }),
        ]);
        tr.addEventListener('click', function () {
          if (k.children.size && (!k.entry || k.open !== undefined)) {
            k.open = !k.open;
          }
          if (k.entry && k.entry.path) select(tr, k.entry);
          if (k.children.size) redraw();
        });
        body.appendChild(tr);
        if (k.open) walk(k, depth + 1);
      });
    }
    walk(tree, 0);
    return body;
  }

  var current = null;
  function redraw() {
    var t = h('table', {}, [
      h('thead', {}, [
        h('tr', {}, [
          h('th', { text: 'entry' }),
          h('th', { text: '' }),
          h('th', { text: 'type' }),
          h('th', { text: 'size' }),
        ]),
      ]),
    ]);
    t.appendChild(rows(current.tree, current.archives));
    var selected = app.dataset.selected;
    table.innerHTML = '';
    table.appendChild(t);
    if (selected) {
      var tr = table.querySelector('tr[data-path="' + selected.replace(/"/g, '\\"') + '"]');
      if (tr) tr.classList.add('selected');
    }
    dossierHost.reportSize();
  }

  function show(reply) {
    return finished(reply).then(function (done) {
      if (!done.evidence_id)
        throw done.error || { message: 'The launch ' + done.status + ' without Evidence.' };
      evidenceId = done.evidence_id;
      return Promise.all([
        allRows(evidenceId, 'entries'),
        allRows(evidenceId, 'archives').catch(function () {
          return []; // extract_firmware keeps no archives collection
        }),
      ]).then(function (both) {
        var entries = both[0];
        var archives = both[1];
        current = { tree: treeOf(entries), archives: archives };
        redraw();
        var refused = entries.filter(function (e) {
          return e.status === 'refused';
        }).length;
        var nested = archives.filter(function (a) {
          return a.depth > 0;
        }).length;
        title.textContent =
          'Extraction tree of ' + (args.artifact ? args.artifact.slice(0, 19) + '…' : evidenceId);
        status.textContent =
          entries.length +
          ' entries, ' +
          nested +
          ' nested archives opened, ' +
          refused +
          ' refused. Click an entry for its row.';
        app.dataset.entries = String(entries.length);
        app.dataset.refused = String(refused);
        app.dataset.state = 'ready';
      });
    });
  }

  dossierHost.on('ui/notifications/tool-input', function (p) {
    args = p.arguments || {};
  });
  dossierHost.on('ui/notifications/tool-result', function (result) {
    show(dossierHost.structured(result)).catch(function (err) {
      showError(app, err);
    });
  });
  dossierHost.connect('dossier-extraction-tree');
})();
