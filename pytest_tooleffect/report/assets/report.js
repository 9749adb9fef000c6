/* pytest-tooleffect report page: the decision browser. Plain JavaScript, no library, no request:
   the data is in the page (gzip, base64) and is inflated with DecompressionStream. */
(function () {
  'use strict';
  var PAGE = 100;
  var BASELINE_ORDER = { regression: 0, changed: 1, fixed: 2 };
  var state = { all: [], shown: [], page: 0, byId: new Map(), data: null, selected: null };

  function h(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === 'text') node.textContent = v;
        else if (k === 'cls') node.className = v;
        else if (k.slice(0, 2) === 'on') node.addEventListener(k.slice(2), v);
        else node.setAttribute(k, v === true ? '' : v);
      });
    }
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }
  function add(node, kid) {
    if (kid === null || kid === undefined || kid === false) return;
    if (Array.isArray(kid)) { kid.forEach(function (k) { add(node, k); }); return; }
    node.appendChild(typeof kid === 'string' || typeof kid === 'number' ? document.createTextNode(String(kid)) : kid);
  }
  function json(v) { return JSON.stringify(v, null, 2); }
  function pre(v) { return h('pre', { text: typeof v === 'string' ? v : json(v) }); }

  async function inflate() {
    var node = document.getElementById('te-data');
    var b64 = node ? node.textContent.trim() : '';
    if (!b64) return null;
    var bytes;
    if (typeof Uint8Array.fromBase64 === 'function') bytes = Uint8Array.fromBase64(b64);
    else {
      var bin = atob(b64);
      bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return await new Response(stream).json();
  }

  function outcome(r) {
    if (r.outcome === 'error') return 'error';
    var v = r.verdict || {};
    var passed = v.name_ok && v.name_args_ok && (!r.effect || r.effect.passed);
    return passed ? 'passed' : 'failed';
  }
  function emittedTools(r) {
    var v = r.verdict;
    if (!v) return [];
    var names = (v.emitted || []).map(function (e) { return e.tool === null || e.tool === undefined ? 'no tool' : e.tool; });
    if (v.malformed && v.malformed.length) names.push('malformed');
    return names.filter(function (n, i) { return names.indexOf(n) === i; });
  }
  function row(r, disagree) {
    return {
      r: r, id: r.id, family: r.family, policy: r.policy, cls: r['class'], bucket: r.bucket,
      kind: r.verdict ? r.verdict.kind : 'error', outcome: outcome(r), tools: emittedTools(r),
      baseline: r.baseline && r.baseline.status ? r.baseline.status : 'none',
      disagree: disagree.has(r.id) ? 'disagree' : 'agree', caseId: r.case_id
    };
  }

  function filters() {
    var out = {};
    document.querySelectorAll('#filters [data-key]').forEach(function (n) { out[n.getAttribute('data-key')] = n.value; });
    return out;
  }
  function matches(d, f) {
    if (f.family && d.family !== f.family) return false;
    if (f.policy && d.policy !== f.policy) return false;
    if (f.cls && d.cls !== f.cls) return false;
    if (f.bucket && d.bucket !== f.bucket) return false;
    if (f.kind && d.kind !== f.kind) return false;
    if (f.tool && d.tools.indexOf(f.tool) < 0) return false;
    if (f.outcome && d.outcome !== f.outcome) return false;
    if (f.baseline && d.baseline !== f.baseline) return false;
    if (f.disagree && d.disagree !== f.disagree) return false;
    if (f.q && d.caseId.toLowerCase().indexOf(f.q.toLowerCase()) < 0 && d.id.toLowerCase().indexOf(f.q.toLowerCase()) < 0) return false;
    return true;
  }

  function fillSelect(key, values, labels) {
    var sel = document.querySelector('#filters [data-key="' + key + '"]');
    if (!sel) return;
    sel.textContent = '';
    sel.appendChild(h('option', { value: '', text: 'all' }));
    values.forEach(function (v) { sel.appendChild(h('option', { value: v, text: labels && labels[v] ? labels[v] : v })); });
    if (values.length < 2 && key !== 'kind' && key !== 'outcome') sel.parentNode.style.display = values.length ? '' : 'none';
  }
  function distinct(key) {
    var seen = new Set();
    state.all.forEach(function (d) { var v = d[key]; (Array.isArray(v) ? v : [v]).forEach(function (x) { seen.add(x); }); });
    return Array.from(seen).sort();
  }

  function apply() {
    var f = filters();
    state.shown = state.all.filter(function (d) { return matches(d, f); });
    state.page = 0;
    draw();
  }

  function draw() {
    var body = document.querySelector('#decisions tbody');
    body.textContent = '';
    var pages = Math.max(1, Math.ceil(state.shown.length / PAGE));
    if (state.page >= pages) state.page = pages - 1;
    var start = state.page * PAGE;
    state.shown.slice(start, start + PAGE).forEach(function (d) {
      var tr = h('tr', { 'data-id': d.id, 'data-kind': d.kind, cls: state.selected === d.id ? 'sel' : '',
        onclick: function () { location.hash = 'd=' + encodeURIComponent(d.id); } },
        h('td', null, h('a', { href: '#d=' + encodeURIComponent(d.id), text: d.id })),
        h('td', { text: d.cls }), h('td', { text: d.bucket }), h('td', { text: d.kind }),
        h('td', { text: d.tools.join(', ') }),
        h('td', { cls: 'o-' + (d.outcome === 'passed' ? 'pass' : d.outcome === 'failed' ? 'fail' : 'error'),
          text: d.outcome + (d.r.xfail ? ' (xfail)' : '') + (d.baseline !== 'none' ? ' · ' + d.baseline : '') }));
      body.appendChild(tr);
    });
    document.getElementById('count').textContent = state.shown.length + ' of ' + state.all.length + ' decisions';
    document.getElementById('page').textContent = 'page ' + (state.page + 1) + ' of ' + pages;
    document.getElementById('prev').disabled = state.page === 0;
    document.getElementById('next').disabled = state.page >= pages - 1;
  }

  function annotations(t) {
    var a = t.annotations || {};
    var out = [];
    if (a.readOnlyHint) out.push(h('span', { cls: 'ann ro', text: 'readOnlyHint' }));
    if (a.destructiveHint) out.push(h('span', { cls: 'ann destr', text: 'destructiveHint' }));
    if (a.idempotentHint) out.push(h('span', { cls: 'ann', text: 'idempotentHint' }));
    if (a.openWorldHint) out.push(h('span', { cls: 'ann', text: 'openWorldHint' }));
    if (a.readOnlyHint === false) out.push(h('span', { cls: 'ann', text: 'readOnlyHint: false' }));
    return out;
  }
  function content(c) {
    if (c === null || c === undefined) return '';
    if (typeof c === 'string') return c;
    if (Array.isArray(c)) return c.map(function (p) { return typeof p === 'string' ? p : (p.text !== undefined ? p.text : json(p)); }).join('\n');
    return json(c);
  }
  function message(m) {
    var role = m.role || 'message';
    var parts = [h('span', { cls: 'role', text: role + (m.name ? ' · ' + m.name : '') + (m.tool_call_id ? ' · ' + m.tool_call_id : '') })];
    var text = content(m.content);
    if (text) parts.push(text);
    (m.tool_calls || []).forEach(function (tc) {
      var fn = tc['function'] || tc;
      var args = fn.arguments;
      if (typeof args === 'string') { try { args = JSON.parse(args); } catch (e) { /* shown as written */ } }
      parts.push(h('div', null, h('b', { text: '→ ' + (fn.name || '?') }), pre(args === undefined ? {} : args)));
    });
    return h('div', { cls: 'msg ' + role }, parts);
  }
  function action(a) {
    if (a.parallel) {
      return h('li', null, 'parallel group' + (a.order_matters ? ' (order matters)' : '') + (a.reason ? ' — ' + a.reason : ''),
        h('ul', null, a.parallel.map(action)));
    }
    var name = a.tool === null || a.tool === undefined ? 'no tool' : a.tool;
    return h('li', null, h('b', { text: name }), a.args && Object.keys(a.args).length ? pre(a.args) : null,
      a.reason ? h('div', { cls: 'meta', text: a.reason }) : null,
      a.text_criteria ? h('div', { cls: 'meta', text: 'reply criteria: ' + a.text_criteria }) : null);
  }

  function detail(id) {
    var pane = document.getElementById('detail');
    var d = state.byId.get(id);
    pane.textContent = '';
    state.selected = id;
    document.querySelectorAll('#decisions tbody tr').forEach(function (tr) {
      tr.className = tr.getAttribute('data-id') === id ? 'sel' : '';
    });
    if (!d) { pane.appendChild(h('p', { cls: 'warn', text: 'no record ' + id + ' in this page' })); return; }
    var r = d.r, v = r.verdict, data = state.data;
    var fam = (data.families || {})[r.family];
    var st = ((data.cases || {})[r.family] || {})[r.case_id];
    pane.appendChild(h('h3', { id: 'detail-title', text: r.id }));
    pane.appendChild(h('p', { cls: 'meta' }, 'family ' + r.family + ' · policy ' + r.policy + (r.model ? ' (' + r.model + ')' : '') +
      ' · class ' + r['class'] + ' · bucket ' + r.bucket + ' (step ' + r.step + ' of ' + r.run_length + ')' +
      (r.trial ? ' · trial ' + r.trial : '') + (r.xfail ? ' · xfail' : '') +
      (r.baseline ? ' · baseline: ' + r.baseline.status + (r.baseline.status === 'changed' ? ' (' + r.baseline.before + ' in the baseline, ' + r.baseline.after + ' now)' : '') : '') + (r.source ? ' · source ' + [r.source.kind, r.source.dataset, r.source.trace_id].filter(Boolean).join(' ') : '')));

    if (r.perturbation) {  // a perturbed-catalog variant: the state shown below is the original case's
      var pt = r.perturbation;
      pane.appendChild(h('p', { id: 'detail-perturbation', cls: 'warn', text: 'perturbed catalog ' + pt.name + ' (' + pt.kind + '): ' +
        pt.catalog_size + ' tools offered (' + (pt.added || 0) + ' added, ' + (pt.removed || []).length + ' removed, ' + (pt.renamed || 0) + ' renamed); ' +
        'the tools and label below are the original case\u2019s, paired with ' + pt.base_id + ' (docs: robustness)' }));
    }
    var verdictBox = h('div', { id: 'detail-verdict' });
    if (r.outcome === 'error') {
      verdictBox.appendChild(h('p', { cls: 'warn' }, h('b', { text: 'not scored: ' + (r.error ? r.error.type + ': ' + r.error.message : 'error') })));
      if (r.error && r.error.traceback) verdictBox.appendChild(pre(r.error.traceback));
    } else if (v) {
      verdictBox.appendChild(h('p', null, 'verdict ', h('span', { cls: 'verdict-kind ' + (d.outcome === 'passed' ? 'good' : 'bad'), text: v.kind }),
        ' · name ' + (v.name_ok ? 'ok' : 'failed') + ' · name + args ' + (v.name_args_ok ? 'ok' : 'failed') +
        (r.effect ? ' · effect ' + r.effect.kind : '') + (r.no_tool_failure ? ' · no-tool failure: ' + r.no_tool_failure.replace('_', ' ') : '') +
        (v.approximate ? ' · approximate' : '')));
      if (v.forbidden) verdictBox.appendChild(h('p', { cls: 'bad' }, 'forbidden action hit: ', pre(v.forbidden)));
      if (v.matched) verdictBox.appendChild(h('div', null, 'matched alternative: ', pre(v.matched)));
      if (v.malformed && v.malformed.length) verdictBox.appendChild(h('div', { cls: 'bad' }, 'malformed: ', pre(v.malformed.join('\n'))));
      if (v.reply) verdictBox.appendChild(h('div', { id: 'detail-reply-check', cls: v.reply.ok ? 'good' : 'bad' },
        'reply check' + (v.reply.reply ? ' (reply: ' + v.reply.reply + ')' : '') + (v.reply.approximate ? ', approximate' : '') + ': ' +
        (v.reply.ok ? 'passed' : v.reply.failures.join('; '))));
      if (v.fields && v.fields.length) {
        verdictBox.appendChild(h('table', { cls: 'list fields' },
          h('thead', null, h('tr', null, ['field', 'result', 'rule', 'expected', 'got', 'why'].map(function (c) { return h('th', { text: c }); }))),
          h('tbody', null, v.fields.map(function (f) {
            return h('tr', { cls: f.ok ? 'good' : 'bad' }, h('td', null, h('code', { text: f.path })), h('td', { text: f.ok ? 'ok' : 'failed' }),
              h('td', { text: f.rule || '' }), h('td', null, pre(f.expected)), h('td', null, pre(f.got)), h('td', { text: f.reason || '' }));
          }))));
      }
      if (v.unruled && v.unruled.length) verdictBox.appendChild(h('p', { cls: 'meta', text: 'unruled (compared raw): ' + v.unruled.join(', ') }));
    }

    var emitted = h('div', { id: 'detail-emitted' });
    if (v) emitted.appendChild(h('ul', null, (v.emitted || []).map(action)));
    // the record's reply text (records written before it had one: the first sandboxed step's)
    var text = v && v.reply_text !== undefined ? v.reply_text : (r.steps && r.steps.length ? r.steps[0].text : null);
    if (text) emitted.appendChild(h('div', { id: 'detail-reply', cls: 'msg assistant' }, h('span', { cls: 'role', text: 'reply text' }), text));
    if (v && v.malformed_raw) v.malformed_raw.forEach(function (raw, i) {
      emitted.appendChild(h('div', { cls: 'msg assistant malformed-raw' }, h('span', { cls: 'role', text: 'malformed call ' + (i + 1) + ', as written' }), pre(raw)));
    });
    if (r.agent) emitted.appendChild(h('p', { cls: 'meta', text: 'agent ' + r.agent.callable }));
    var c = r.cost;
    if (c && c.input_tokens === null && c.output_tokens === null && c.cost_usd === null && c.latency_ms === null) {
      emitted.appendChild(h('p', { cls: 'meta', text: 'cost not recorded' + (r.policy === 'replay' ? ' (a replayed decision)' : '') }));
    } else if (c) {
      emitted.appendChild(h('p', { cls: 'meta', text: 'cost: ' + (c.input_tokens === null ? '–' : c.input_tokens) + ' in / ' +
        (c.output_tokens === null ? '–' : c.output_tokens) + ' out tokens · ' + (c.latency_ms === null ? '–' : Math.round(c.latency_ms) + ' ms') +
        ' · ' + (c.cost_usd === null ? 'USD unknown' : '$' + c.cost_usd) + (r.cached ? ' · from the model cache' : '') }));
    }

    var convo = h('div', { id: 'detail-conversation' });
    var tools = h('div', { id: 'detail-tools' });
    var label = h('div', { id: 'detail-label' });
    if (!st) {
      convo.appendChild(h('p', { cls: 'warn', text: 'the state of ' + r.family + '/' + r.case_id +
        ' was not read (its case file was not found): no conversation, tools or label to show' }));
    } else {
      var pol = fam && fam.policies ? fam.policies[r.policy] : null;
      var prompt = pol && pol.system_prompt !== null && pol.system_prompt !== undefined ? pol.system_prompt : (fam ? fam.system_prompt : null);
      if (prompt) convo.appendChild(message({ role: 'system', content: prompt + (pol && pol.system_prompt ? '\n\n(the policy\u2019s prompt)' : '') }));
      st.messages.forEach(function (m) { convo.appendChild(message(m)); });
      if (st.timezone) convo.appendChild(h('p', { cls: 'meta', text: 'user time zone ' + st.timezone }));
      var offered = st.tools || (fam ? fam.tools : []);
      var descs = pol && pol.tool_descriptions ? pol.tool_descriptions : {};
      offered.forEach(function (t) {
        var desc = descs[t.name] !== undefined ? descs[t.name] + ' (the policy\u2019s description)' : (t.description || '');
        tools.appendChild(h('div', { cls: 'tool-offered' }, h('b', { text: t.name }), annotations(t),
          h('div', { cls: 'meta', text: desc }), h('details', null, h('summary', { text: 'parameters' }), pre(t.parameters || {}))));
      });
      if (st.label) {
        if (st.label_hash !== r.label_hash) {
          label.appendChild(h('p', { cls: 'warn', text: 'the case file\u2019s label (' + st.label_hash + ') is not the one this decision was scored against (' + r.label_hash + '): the case changed since the run' }));
        }
        label.appendChild(h('div', null, h('b', { text: 'valid actions' }), h('ul', null, st.label.valid_actions.map(action))));
        label.appendChild(h('div', null, h('b', { text: 'forbidden actions' }),
          st.label.forbidden_actions && st.label.forbidden_actions.length ? h('ul', null, st.label.forbidden_actions.map(function (a) {
            return h('li', null, h('b', { text: a.tool }), a.args ? pre(a.args) : ' (any arguments)', a.reason ? h('div', { cls: 'meta', text: a.reason }) : null);
          })) : h('span', { cls: 'meta', text: ' none' })));
        if (st.label.labelled_by && st.label.labelled_by.length) label.appendChild(h('p', { cls: 'meta', text: 'labelled by ' + st.label.labelled_by.join(', ') }));
      }
    }

    var sandbox = null;
    if (r.sandbox || r.steps || r.effect || (st && st.world)) {
      sandbox = h('div', { id: 'detail-sandbox' });
      if (r.sandbox) sandbox.appendChild(h('p', { cls: 'meta', text: 'sandbox ' + r.sandbox.provider + ' ' + r.sandbox.id + ' · ' + (r.sandbox.restrictions || []).join(', ') }));
      var faults = r.faults && r.faults.length ? r.faults : null;
      if (faults || (st && st.faults)) sandbox.appendChild(h('div', null, h('b', { text: 'injected faults' }), pre(st && st.faults ? st.faults : faults)));
      (r.steps || []).forEach(function (s) {
        sandbox.appendChild(h('div', null, h('b', { text: 'step ' + s.step + ': calls as run' }),
          s.calls && s.calls.length ? h('table', { cls: 'list' }, h('thead', null, h('tr', null, ['call', 'arguments', 'answer', 'fault', 'ms'].map(function (c) { return h('th', { text: c }); }))),
            h('tbody', null, s.calls.map(function (c) {
              return h('tr', { cls: c.error ? 'bad' : '' }, h('td', { text: c.name + (c.executed === false ? ' (not run)' : '') }), h('td', null, pre(c.arguments)),
                h('td', null, pre(c.error ? 'error: ' + c.error : c.content)), h('td', { text: c.fault ? json(c.fault) : '' }),
                h('td', { text: c.latency_ms === undefined || c.latency_ms === null ? '' : Math.round(c.latency_ms) }));
            }))) : h('span', { cls: 'meta', text: ' no call' })));
      });
      if (r.rollout) sandbox.appendChild(h('p', { cls: 'meta', text: 'rollout: ' + r.rollout.steps + ' step(s), stopped: ' + r.rollout.stopped + ' (limit ' + r.rollout.limit + ')' + (r.recovery ? ' · recovery: ' + r.recovery : '') }));
      if (r.effect) {
        sandbox.appendChild(h('p', null, 'effect ', h('b', { cls: r.effect.passed ? 'good' : 'bad', text: r.effect.kind })));
        if (r.effect.failures && r.effect.failures.length) sandbox.appendChild(h('ul', null, r.effect.failures.map(function (f) { return h('li', { cls: 'bad', text: f }); })));
        sandbox.appendChild(h('div', null, h('b', { text: 'world diff' }), Object.keys(r.effect.diff || {}).length ? pre(r.effect.diff) : h('span', { cls: 'meta', text: ' no change' })));
      }
      if (st && (st.expected_effects || st.forbidden_effects)) {
        sandbox.appendChild(h('div', null, h('b', { text: 'expected effects' }), h('ul', null, (st.expected_effects || []).map(function (e) { return h('li', { text: e }); })),
          h('b', { text: 'forbidden effects' }), h('ul', null, (st.forbidden_effects || []).map(function (e) { return h('li', { text: e }); }))));
      }
      if (st && st.world) sandbox.appendChild(h('details', null, h('summary', { text: 'world before the decision' }), pre(st.world)));
    }

    pane.appendChild(h('h3', { text: 'Verdict' })); pane.appendChild(verdictBox);
    pane.appendChild(h('h3', { text: 'Emitted' })); pane.appendChild(emitted);
    pane.appendChild(h('h3', { text: 'Label set' })); pane.appendChild(label);
    pane.appendChild(h('h3', { text: 'Conversation as the agent saw it' })); pane.appendChild(convo);
    pane.appendChild(h('h3', { text: 'Tools offered' })); pane.appendChild(tools);
    if (sandbox) { pane.appendChild(h('h3', { text: 'Sandbox' })); pane.appendChild(sandbox); }
    pane.scrollTop = 0;
  }

  function route() {
    var m = /^#d=(.+)$/.exec(location.hash);
    if (m && state.data) {
      detail(decodeURIComponent(m[1]));
      document.getElementById('browser').scrollIntoView();
    }
  }

  async function main() {
    var data;
    try { data = await inflate(); } catch (e) {
      document.getElementById('count').textContent = 'the decision data could not be read in this browser (' + e + ')';
      return;
    }
    if (!data) return;
    state.data = data;
    var disagree = new Set(data.disagree || []);
    // the records come in the page's order (record ids, a trial read as a number): kept within each baseline status
    state.all = data.records.map(function (r, i) { var d = row(r, disagree); d.order = i; return d; });
    state.all.sort(function (a, b) {
      var ra = a.baseline in BASELINE_ORDER ? BASELINE_ORDER[a.baseline] : 3, rb = b.baseline in BASELINE_ORDER ? BASELINE_ORDER[b.baseline] : 3;
      return ra - rb || a.order - b.order;
    });
    state.all.forEach(function (d) { state.byId.set(d.id, d); });
    ['family', 'policy', 'cls', 'bucket', 'kind', 'tool', 'outcome', 'baseline', 'disagree'].forEach(function (k) {
      var key = k === 'tool' ? 'tools' : k;
      var vals = distinct(key);
      if (k === 'baseline' && vals.length === 1 && vals[0] === 'none') vals = [];
      if (k === 'disagree' && disagree.size === 0) vals = [];
      fillSelect(k, vals, k === 'disagree' ? { disagree: 'disagree', agree: 'agree' } : null);
    });
    document.querySelectorAll('#filters select, #filters input').forEach(function (n) {
      n.addEventListener(n.tagName === 'INPUT' ? 'input' : 'change', apply);
    });
    document.getElementById('reset').addEventListener('click', function () {
      document.querySelectorAll('#filters [data-key]').forEach(function (n) { n.value = ''; });
      apply();
    });
    document.getElementById('prev').addEventListener('click', function () { state.page--; draw(); });
    document.getElementById('next').addEventListener('click', function () { state.page++; draw(); });
    document.querySelectorAll('a[data-filter-kind]').forEach(function (a) {
      a.addEventListener('click', function () {
        var set = { family: a.getAttribute('data-filter-family'), policy: a.getAttribute('data-filter-policy'), kind: a.getAttribute('data-filter-kind') };
        document.querySelectorAll('#filters [data-key]').forEach(function (n) { n.value = set[n.getAttribute('data-key')] || ''; });
        apply();
      });
    });
    if ((data.problems || []).length) {
      document.getElementById('count').insertAdjacentElement('afterend', h('details', { cls: 'meta' },
        h('summary', { text: data.problems.length + ' problem(s) reading the case files' }), pre(data.problems.join('\n'))));
    }
    window.addEventListener('hashchange', route);
    apply();
    route();
  }
  main().catch(function (e) {
    document.getElementById('count').textContent = 'the decision browser failed: ' + e;
  }).then(function () { document.body.setAttribute('data-ready', 'true'); });
})();
