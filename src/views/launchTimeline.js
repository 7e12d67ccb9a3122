// The launch timeline View: one launch from the claim of its key to the
// retention of its Evidence, on a time axis and as a list: workflow start,
// each dispatch of its effect, re-dispatches and interruptions, the moment the
// effect began (the journal), the outcome. Read with get_launch_timeline, a
// tool only Views see; a running launch is read again until it finishes.
'use strict';
(function () {
  var app = document.getElementById('app');
  var key = null;
  app.innerHTML = '';
  var title = app.appendChild(h('h1', { text: 'Launch timeline' }));
  var status = app.appendChild(h('p', { class: 'status', text: 'Waiting for the launch…' }));
  var chart = app.appendChild(h('div', { class: 'graph' }));
  var list = app.appendChild(h('div', {}));
  var COLORS = {
    claimed: '#5b6475',
    workflow_started: '#2f6fde',
    dispatched: '#2f6fde',
    picked_up: '#6c8ebf',
    redispatched: '#b7791f',
    interrupted: '#c0392b',
    cancel_requested: '#b7791f',
    effect_began: '#8e44ad',
    effect_returned: '#2e8b57',
    finished: '#2e8b57',
    retained: '#16a085',
  };

  function draw(t) {
    var moments = t.moments;
    var t0 = Date.parse(moments[0].at);
    var t1 = Date.parse(moments[moments.length - 1].at);
    var span = Math.max(t1 - t0, 1);
    var width = 960;
    var left = 150;
    var right = 30;
    var x = function (at) {
      return left + ((Date.parse(at) - t0) / span) * (width - left - right);
    };
    var first = function (kind, dispatch) {
      return moments.find(function (m) {
        return m.kind === kind && (dispatch === undefined || m.dispatch === dispatch);
      });
    };
    var end = first('finished') || moments[moments.length - 1];
    // One lane per phase: a bar from its first moment to its last, the moments on it as dots.
    var lanes = [
      { name: 'launch', from: first('claimed'), to: end, kinds: ['claimed', 'finished'] },
      { name: 'workflow', from: first('workflow_started'), to: end, kinds: ['workflow_started'] },
    ];
    for (var d = 1; d <= t.dispatches; d++) {
      var scheduled = first('dispatched', d) || first('redispatched', d);
      var over = first('interrupted', d) || first('effect_returned', d) || end;
      lanes.push({ name: 'dispatch #' + d, from: scheduled, to: over, dispatch: d });
    }
    lanes.push({ name: 'effect', from: first('effect_began'), to: end, kinds: ['effect_began'] });
    lanes.push({ name: 'evidence', from: first('retained'), to: first('retained'), kinds: ['retained'] });
    var laneH = 26;
    var height = 30 + lanes.length * laneH + 24;
    var root = svg('svg', { width: width, height: height, viewBox: '0 0 ' + width + ' ' + height });
    [0, 0.25, 0.5, 0.75, 1].forEach(function (f) {
      var px = left + f * (width - left - right);
      root.appendChild(
        svg('g', { class: 'axis' }, [
          svg('line', { x1: px, x2: px, y1: 20, y2: height - 20 }),
          svg('text', {
            x: px,
            y: height - 6,
            'text-anchor': 'middle',
            text: '+' + ((f * span) / 1000).toFixed(2) + ' s',
          }),
        ]),
      );
    });
    lanes.forEach(function (lane, i) {
      var y = 24 + i * laneH;
      root.appendChild(svg('text', { class: 'lane', x: 8, y: y + 15, text: lane.name }));
      if (!lane.from) return;
      var x1 = x(lane.from.at);
      var x2 = Math.max(x(lane.to.at), x1 + 2);
      var broken = lane.dispatch && first('interrupted', lane.dispatch);
      root.appendChild(
        svg('rect', {
          class: 'bar' + (broken ? ' broken' : ''),
          x: x1,
          y: y + 6,
          width: x2 - x1,
          height: 12,
          rx: 3,
        }),
      );
      moments
        .filter(function (m) {
          return lane.dispatch ? m.dispatch === lane.dispatch : lane.kinds.indexOf(m.kind) >= 0;
        })
        .forEach(function (m) {
          var failed = m.kind === 'finished' && t.status !== 'succeeded';
          var big = m.kind === 'redispatched' || m.kind === 'interrupted' || failed;
          root.appendChild(
            svg('g', { class: 'moment ' + m.kind, 'data-kind': m.kind }, [
              svg('title', { text: m.label + ' at ' + m.at + (m.detail ? '\n' + m.detail : '') }),
              svg('circle', {
                cx: x(m.at),
                cy: y + 12,
                r: big ? 7 : 5,
                fill: failed ? '#c0392b' : COLORS[m.kind] || '#5b6475',
              }),
            ]),
          );
        });
    });
    chart.innerHTML = '';
    chart.appendChild(root);
    drawMoments(t, t0);
    dossierHost.reportSize();
  }

  // The moments as a table, each with its time since the first.
  function drawMoments(t, t0) {
    var body = h('tbody');
    t.moments.forEach(function (m) {
      var ms = Date.parse(m.at) - t0;
      body.appendChild(
        h('tr', { class: m.kind + (m.kind === 'finished' ? ' ' + t.status : ''), 'data-kind': m.kind }, [
          h('td', { class: 'when', text: m.at.slice(11, 23) + '  +' + ms + ' ms' }),
          h('td', { text: m.label + (m.dispatch ? ' #' + m.dispatch : '') }),
          h('td', { text: m.detail || '' }),
        ]),
      );
    });
    list.innerHTML = '';
    list.appendChild(
      h('table', { class: 'moments' }, [
        h('thead', {}, [
          h('tr', {}, [h('th', { text: 'when' }), h('th', { text: 'moment' }), h('th', { text: 'detail' })]),
        ]),
        body,
      ]),
    );
  }

  function read(tries) {
    return dossierHost.call('get_launch_timeline', { idempotency_key: key }).then(function (t) {
      if (t.error) throw t.error;
      title.textContent = t.tool + ' · ' + t.idempotency_key;
      draw(t);
      var extra =
        (t.dispatches > 1 ? ', ' + (t.dispatches - 1) + ' re-dispatched' : '') +
        (t.interruptions ? ', ' + t.interruptions + ' interrupted' : '');
      status.textContent =
        t.status +
        ': ' +
        t.moments.length +
        ' moments, ' +
        t.dispatches +
        ' dispatch' +
        (t.dispatches === 1 ? '' : 'es') +
        extra +
        '.' +
        (t.limitations.length ? ' ' + t.limitations.join(' ') : '');
      app.dataset.moments = t.moments
        .map(function (m) {
          return m.kind;
        })
        .join(' ');
      if (t.status === 'running' && (tries || 0) < 150) {
        app.dataset.state = 'loading';
        return new Promise(function (resolve) {
          setTimeout(resolve, 2000);
        }).then(function () {
          return read((tries || 0) + 1);
        });
      }
      app.dataset.state = 'ready';
    });
  }

  dossierHost.on('ui/notifications/tool-input', function (p) {
    key = (p.arguments || {}).idempotency_key || null;
  });
  dossierHost.on('ui/notifications/tool-result', function (result) {
    var reply = dossierHost.structured(result);
    if (reply.error && !key) return showError(app, reply.error);
    key = key || (reply.launch && reply.launch.idempotency_key) || reply.idempotency_key;
    if (!key) return showError(app, { message: 'The result names no launch.' });
    read(0).catch(function (err) {
      showError(app, err);
    });
  });
  dossierHost.connect('dossier-launch-timeline');
})();
