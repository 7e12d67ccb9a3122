// The View's side of the MCP Apps protocol (io.modelcontextprotocol/ui,
// 2026-01-26): JSON-RPC 2.0 over postMessage with the host, its parent window.
// ui/initialize, then ui/notifications/initialized; the host sends the tool's
// input and result as notifications; tools/call goes to dossier through the
// host, with the host's token. Nothing here reaches the network.
'use strict';
/* exported dossierHost, h, svg, formatBytes, showError, allRows */
var dossierHost = (function () {
  var nextId = 1;
  var pending = new Map();
  var listeners = new Map();
  var context = {};

  function post(message) {
    window.parent.postMessage(Object.assign({ jsonrpc: '2.0' }, message), '*');
  }

  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending.set(id, { resolve: resolve, reject: reject });
      post({ id: id, method: method, params: params || {} });
    });
  }

  function notify(method, params) {
    post({ method: method, params: params || {} });
  }

  function emit(method, params) {
    (listeners.get(method) || []).forEach(function (fn) {
      fn(params || {});
    });
  }

  window.addEventListener('message', function (event) {
    if (event.source !== window.parent) return;
    var m = event.data;
    if (!m || m.jsonrpc !== '2.0') return;
    if (m.method === undefined && pending.has(m.id)) {
      var p = pending.get(m.id);
      pending.delete(m.id);
      if (m.error) p.reject(Object.assign(new Error(m.error.message), { data: m.error.data }));
      else p.resolve(m.result);
    } else if (m.method && m.id !== undefined) {
      // Requests from the host: teardown and ping need only an answer.
      post({ id: m.id, result: {} });
      emit(m.method, m.params);
    } else if (m.method) {
      if (m.method === 'ui/notifications/host-context-changed') applyContext(m.params);
      emit(m.method, m.params);
    }
  });

  function applyContext(ctx) {
    context = Object.assign({}, context, ctx || {});
    var root = document.documentElement;
    if (context.theme) root.dataset.theme = context.theme;
    var vars = (context.styles && context.styles.variables) || {};
    Object.keys(vars).forEach(function (k) {
      if (vars[k]) root.style.setProperty(k, vars[k]);
    });
  }

  function reportSize() {
    var el = document.documentElement;
    notify('ui/notifications/size-changed', { width: el.scrollWidth, height: el.scrollHeight });
  }

  /** A tool result's JSON: its structuredContent, else its first text block parsed. */
  function structured(result) {
    if (!result) return {};
    if (result.structuredContent) return result.structuredContent;
    var text = (result.content || []).find(function (c) {
      return c.type === 'text';
    });
    try {
      return text ? JSON.parse(text.text) : {};
    } catch {
      return {};
    }
  }

  return {
    on: function (method, fn) {
      listeners.set(method, (listeners.get(method) || []).concat([fn]));
    },
    connect: function (name) {
      return request('ui/initialize', {
        appInfo: { name: name, version: '__DOSSIER_VERSION__' },
        appCapabilities: {},
        protocolVersion: '2026-01-26',
      }).then(function (result) {
        applyContext(result.hostContext);
        notify('ui/notifications/initialized', {});
        if (typeof ResizeObserver === 'function') new ResizeObserver(reportSize).observe(document.body);
        return result;
      });
    },
    /** Calls a dossier tool through the host; resolves to its structured reply (errors included). */
    call: function (name, args) {
      return request('tools/call', { name: name, arguments: args }).then(structured, function (err) {
        return { error: { code: 'host_refused', message: err.message } };
      });
    },
    structured: structured,
    reportSize: reportSize,
  };
})();

/** Small DOM helpers shared by the Views. */
function h(tag, attrs, children) {
  var el = document.createElement(tag);
  Object.keys(attrs || {}).forEach(function (k) {
    if (k === 'text') el.textContent = attrs[k];
    else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), attrs[k]);
    else el.setAttribute(k, attrs[k]);
  });
  (children || []).forEach(function (c) {
    if (c) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  });
  return el;
}

function svg(tag, attrs, children) {
  var el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  Object.keys(attrs || {}).forEach(function (k) {
    if (k === 'text') el.textContent = attrs[k];
    else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), attrs[k]);
    else el.setAttribute(k, attrs[k]);
  });
  (children || []).forEach(function (c) {
    if (c) el.appendChild(c);
  });
  return el;
}

function formatBytes(n) {
  if (typeof n !== 'number') return '';
  if (n < 1024) return n + ' B';
  if (n < 1048576) return (n / 1024).toFixed(1) + ' KiB';
  return (n / 1048576).toFixed(1) + ' MiB';
}

/** Shows a failure in the View's status line and marks the View as settled on it. */
function showError(app, error) {
  var status = app.querySelector('.status') || app.appendChild(h('p', { class: 'status' }));
  status.className = 'status error';
  status.textContent = (error && (error.code ? error.code + ': ' : '') + (error.message || '')) || 'failed';
  app.dataset.state = 'error';
}

/** Every row of one collection of an Evidence record, paged through inspect_analysis_view. */
function allRows(evidenceId, collection, where) {
  var rows = [];
  function page(offset) {
    return dossierHost
      .call('inspect_analysis_view', {
        evidence_id: evidenceId,
        view: { kind: 'page', collection: collection, where: where, offset: offset, limit: 256 },
      })
      .then(function (reply) {
        if (reply.error) throw reply.error;
        reply.rows.forEach(function (r) {
          rows.push(r.row);
        });
        return reply.coverage.exhausted || rows.length >= 5000 ? rows : page(reply.coverage.next_offset);
      });
  }
  return page(0);
}
