// The call graph View: the functions around one function, in columns by call
// level (callers left, callees right). Clicking a function expands it by
// calling get_call_graph again through the host; its "code" link opens its
// decompiled text (decompile_function). Rows come from the tool's result or,
// when the result was a summary, from its Evidence paged by inspect_analysis_view.
'use strict';
(function () {
  var app = document.getElementById('app');
  var state = { args: null, nodes: new Map(), edges: new Map(), root: null, busy: 0 };

  app.innerHTML = '';
  var title = app.appendChild(h('h1', { text: 'Call graph' }));
  var status = app.appendChild(h('p', { class: 'status', text: 'Waiting for the call graph…' }));
  var layout = app.appendChild(h('div', { class: 'layout' }));
  var canvas = layout.appendChild(h('div', { class: 'graph' }));
  var code = layout.appendChild(h('div', { class: 'panel', id: 'code' }));

  function analysisArgs(extra) {
    var a = state.args || {};
    var out = { artifact: a.artifact, wait_ms: 60000 };
    if (a.profile) out.profile = a.profile;
    return Object.assign(out, extra);
  }

  /** Calls an analysis tool until it has finished (a first call may answer running while the database builds). */
  function analyse(tool, args, tries) {
    return dossierHost.call(tool, args).then(function (reply) {
      if (reply.status === 'running' && (tries || 0) < 10) return analyse(tool, args, (tries || 0) + 1);
      return reply;
    });
  }

  /** The edges and nodes of a get_call_graph reply: inline when complete, else paged from its Evidence. */
  function graphOf(reply) {
    if (reply.error) return Promise.reject(reply.error);
    var inline = reply.result && reply.result.collections;
    if (inline) return Promise.resolve({ edges: inline.edges || [], nodes: inline.nodes || [] });
    if (!reply.evidence_id) return Promise.reject({ message: 'the reply holds no call graph' });
    return Promise.all([allRows(reply.evidence_id, 'edges'), allRows(reply.evidence_id, 'nodes')]).then(
      function (both) {
        return { edges: both[0], nodes: both[1] };
      },
    );
  }

  function addNode(address, name, level) {
    var node = state.nodes.get(address);
    if (!node) {
      node = { address: address, name: name || address, level: level, expanded: false };
      state.nodes.set(address, node);
    } else if (name && node.name === node.address) node.name = name;
    return node;
  }

  function merge(graph, from) {
    var base = from ? from.level : 0;
    graph.edges.forEach(function (e) {
      var src = state.nodes.get(e.src);
      var dst = state.nodes.get(e.dst);
      if (!src && !dst) {
        // A new edge whose ends are both unseen: place it by its depth and direction.
        var d = e.direction === 'callers' ? -e.depth : e.depth;
        src = addNode(e.src, e.src_name, base + (e.direction === 'callers' ? d : d - 1));
      }
      src = src || addNode(e.src, e.src_name, state.nodes.get(e.dst).level - 1);
      dst = dst || addNode(e.dst, e.dst_name, src.level + 1);
      if (e.src_name) src.name = e.src_name;
      if (e.dst_name) dst.name = e.dst_name;
      state.edges.set(e.src + '>' + e.dst, { src: e.src, dst: e.dst });
    });
    graph.nodes.forEach(function (n) {
      if (!state.nodes.has(n.address)) addNode(n.address, n.name, base + (n.depth || 0));
    });
  }

  function render() {
    var columns = new Map();
    state.nodes.forEach(function (n) {
      if (!columns.has(n.level)) columns.set(n.level, []);
      columns.get(n.level).push(n);
    });
    var levels = Array.from(columns.keys()).sort(function (a, b) {
      return a - b;
    });
    var W = 190;
    var H = 30;
    var width = Math.max(levels.length * W + 20, 200);
    var height = 20;
    levels.forEach(function (level, i) {
      var col = columns.get(level).sort(function (a, b) {
        return a.name < b.name ? -1 : 1;
      });
      col.forEach(function (n, j) {
        n.x = 10 + i * W;
        n.y = 10 + j * (H + 10);
      });
      height = Math.max(height, 20 + col.length * (H + 10));
    });
    var root = svg('svg', { width: width, height: height, viewBox: '0 0 ' + width + ' ' + height });
    root.appendChild(
      svg('defs', {}, [
        svg(
          'marker',
          {
            id: 'arrow',
            viewBox: '0 0 10 10',
            refX: 10,
            refY: 5,
            markerWidth: 6,
            markerHeight: 6,
            orient: 'auto',
          },
          [svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#5b6475' })],
        ),
      ]),
    );
    state.edges.forEach(function (e) {
      var a = state.nodes.get(e.src);
      var b = state.nodes.get(e.dst);
      if (!a || !b) return;
      var x1 = a.x + 150;
      var y1 = a.y + H / 2;
      var x2 = b.x;
      var y2 = b.y + H / 2;
      if (b.x <= a.x) {
        x1 = a.x + 75;
        x2 = b.x + 75;
        y1 = a.y + H;
        y2 = b.y;
      }
      var mx = (x1 + x2) / 2;
      root.appendChild(
        svg('path', {
          class: 'edge',
          d: 'M' + x1 + ',' + y1 + ' C' + mx + ',' + y1 + ' ' + mx + ',' + y2 + ' ' + x2 + ',' + y2,
          'marker-end': 'url(#arrow)',
        }),
      );
    });
    state.nodes.forEach(function (n) {
      var label = n.name.length > 17 ? n.name.slice(0, 16) + '…' : n.name;
      var cls = 'node' + (n.address === state.root ? ' root' : '') + (n.expanded ? ' expanded' : '');
      root.appendChild(
        svg(
          'g',
          {
            class: cls,
            'data-address': n.address,
            'data-name': n.name,
            transform: 'translate(' + n.x + ',' + n.y + ')',
          },
          [
            svg('title', { text: n.name + ' @ ' + n.address + (n.expanded ? '' : ' (click to expand)') }),
            svg('rect', { width: 150, height: H, onclick: expand.bind(null, n) }),
            svg('text', { x: 6, y: 19, text: label, onclick: expand.bind(null, n) }),
            svg('text', { class: 'open', x: 122, y: 19, text: 'code', onclick: decompile.bind(null, n) }),
          ],
        ),
      );
    });
    canvas.innerHTML = '';
    canvas.appendChild(root);
    app.dataset.nodes = String(state.nodes.size);
    app.dataset.edges = String(state.edges.size);
    dossierHost.reportSize();
  }

  function settle(message) {
    status.className = 'status';
    status.textContent = message;
    app.dataset.state = state.busy ? 'loading' : 'ready';
  }

  function expand(node) {
    if (node.expanded || state.busy) return;
    state.busy++;
    app.dataset.state = 'loading';
    status.textContent = 'Expanding ' + node.name + '…';
    analyse(
      'get_call_graph',
      analysisArgs({ function: node.address, direction: 'both', depth: 1, detail: 'complete' }),
    )
      .then(graphOf)
      .then(function (graph) {
        state.busy--;
        node.expanded = true;
        merge(graph, node);
        render();
        settle(state.nodes.size + ' functions, ' + state.edges.size + ' calls; expanded ' + node.name + '.');
      })
      .catch(function (err) {
        state.busy--;
        showError(app, err);
      });
  }

  function decompile(node, event) {
    if (event) event.stopPropagation();
    code.textContent = 'Decompiling ' + node.name + '…';
    app.dataset.code = 'loading';
    analyse('decompile_function', analysisArgs({ function: node.address, detail: 'complete' }))
      .then(function (reply) {
        if (reply.error) throw reply.error;
        var inline = reply.result && reply.result.collections && reply.result.collections.lines;
        return inline || allRows(reply.evidence_id, 'lines');
      })
      .then(function (lines) {
        code.textContent =
          '// ' +
          node.name +
          ' @ ' +
          node.address +
          '\n' +
          lines
            .map(function (l) {
              return l.text;
            })
            .join('\n');
        app.dataset.code = node.address;
        dossierHost.reportSize();
      })
      .catch(function (err) {
        code.textContent = 'decompile_function: ' + ((err && err.message) || 'failed');
        app.dataset.code = 'error';
      });
  }

  function show(reply) {
    if (reply.status === 'running') {
      status.textContent = 'The analysis is running…';
      return analyse(
        'get_call_graph',
        analysisArgs({
          function: state.args.function,
          direction: state.args.direction,
          depth: state.args.depth,
        }),
      ).then(show);
    }
    return graphOf(reply).then(function (graph) {
      var first = graph.nodes.find(function (n) {
        return n.depth === 0;
      });
      state.root = first ? first.address : graph.edges.length ? graph.edges[0].src : null;
      if (state.root) addNode(state.root, first ? first.name : graph.edges[0].src_name, 0).expanded = true;
      merge(graph, null);
      title.textContent =
        'Call graph around ' + (first ? first.name : (state.args && state.args.function) || '');
      render();
      settle(
        state.nodes.size +
          ' functions, ' +
          state.edges.size +
          ' calls. Click a function to expand it; "code" opens its decompiled text.',
      );
    });
  }

  dossierHost.on('ui/notifications/tool-input', function (p) {
    state.args = p.arguments || {};
  });
  dossierHost.on('ui/notifications/tool-result', function (result) {
    show(dossierHost.structured(result)).catch(function (err) {
      showError(app, err);
    });
  });
  dossierHost.on('ui/notifications/tool-cancelled', function () {
    showError(app, { message: 'The call was cancelled.' });
  });
  dossierHost.connect('dossier-call-graph');
})();
