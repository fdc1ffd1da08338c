// Tessera fleet dashboard. Plain JavaScript, no dependencies, served from the
// `tessera` binary (src/server/ui/, embedded at build time).
//
// Data: GET /api/v1/fleet once (the whole fleet as compact rows), then long
// polls GET /api/v1/fleet?resourceVersion=N&samplesVersion=V&waitSeconds=5 that
// return only what changed after N, and the live utilization samples that
// changed after V (see src/server/fleet.h). Every request carries the
// bearer token the user typed once (kept in sessionStorage for this tab).
//
// Drawing: every GPU is a cell on one <canvas>, painted into an ImageData
// buffer (one Uint32 per pixel) so 100,000 cells cost a few milliseconds.
// Layout: blocks (rows of racks) -> racks (boxes) -> nodes (rows of cells) ->
// NVLink domains (cells of one domain adjacent, a wider gap between domains).
// A change set repaints only the nodes it touched.
//
// For tests and measurements the page exposes window.tessera: stats (time to
// first full render, per-update apply/render times), cellAt(node, gpu) (the
// cell's rectangle on the canvas) and the current model.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const TOKEN_KEY = 'tessera.token';
  const TERMINAL = new Set(['Succeeded', 'Failed']);

  // RGBA colors as little-endian Uint32 (ImageData byte order R,G,B,A).
  function rgb(hex) {
    const v = parseInt(hex.slice(1), 16);
    return (0xff << 24) | ((v & 0xff) << 16) | (v & 0xff00) | (v >> 16);
  }
  const COLORS = {
    background: '#151922',
    rack: '#1c2230',
    healthy: '#2eaa5c',
    unhealthy: '#e0353b',
    notReady: '#6b7280',
    cordoned: '#c9a227',
    free: '#2b3446',
    share: '#3f7fd0',
    full: '#f59e0b',
    util0: '#1e3a5f',    // measured utilization 0% ...
    util100: '#facc15',  // ... to 100%, in 10% steps between
    noData: '#3b3f47',   // the agent reported no utilization
  };
  const C = Object.fromEntries(Object.entries(COLORS).map(([k, v]) => [k, rgb(v)]));
  // The utilization ramp: UTIL_HEX[i] is the color of i*10 % (rounded).
  const UTIL_HEX = Array.from({ length: 11 }, (_, i) => {
    const a = parseInt(COLORS.util0.slice(1), 16), b = parseInt(COLORS.util100.slice(1), 16);
    const ch = (v, s) => (v >> s) & 0xff;
    const mix = (s) => Math.round(ch(a, s) + (ch(b, s) - ch(a, s)) * i / 10);
    return '#' + [16, 8, 0].map((s) => mix(s).toString(16).padStart(2, '0')).join('');
  });
  const UTIL_C = UTIL_HEX.map(rgb);
  const utilStep = (u) => Math.round(Math.min(Math.max(u, 0), 100) / 10);

  const model = {
    rv: null,
    sv: 0,     // samplesVersion: live utilization seen up to here
    // name -> {name, rack, block, phase, model, cordoned, domains, health, endpoint, util}
    // (util: measured % per GPU from the agents' heartbeats, -1 where none was reported)
    nodes: new Map(),
    // "T/ns/name" -> {kind, ns, name, phase, queue, gpus, priority, placement, message,
    //   scale: [bound, desired, min, max, slo p99, mean p99, fresh readings] | undefined
    //   (autoscaled services), cluster, requeues, failovers (federation hub)}
    jobs: new Map(),
    queues: new Map(), // name -> Queue object
    clusters: new Map(), // name -> {name, phase, gpus, free, message} (federation hub's members)
    alloc: new Map(),  // node -> Array(gpus) of allocated milli-GPUs (active jobs)
    jobsOn: new Map(), // node -> Set of job keys placed there
  };
  const view = {
    mode: 'util',
    zoom: 'auto',
    selected: null,
    layout: null,        // {width, height, cell, racks: [...], nodes: Map(name -> geometry)}
    layoutDirty: true,
    dirty: new Set(),    // nodes to repaint
    jobsDirty: true,
    frame: 0,
    img: null,
    buf: null,
  };
  const stats = {
    firstRenderMs: null,   // navigation start -> first full render
    fullFetchMs: null,     // first /api/v1/fleet request, network + parse
    updates: 0,            // change sets applied
    lastApplyMs: null,     // applying the last change set to the model
    lastRenderMs: null,    // repainting after it
    renders: 0,
    lastRender: null,      // {ms, full, nodes}
    renderedRv: null,      // resourceVersion on screen
    gpus: 0, nodes: 0, jobs: 0,
  };

  const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

  async function api(path) {
    const headers = {};
    if (token()) headers.Authorization = 'Bearer ' + token();
    const res = await fetch(path, { headers, cache: 'no-store' });
    if (!res.ok) {
      let msg = res.status + ' ' + res.statusText;
      try { msg = (await res.json()).message || msg; } catch (_) { /* not JSON */ }
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return res.json();
  }

  // ---------------------------------------------------------------- model

  function setNode(row) {
    const [name, rack, block, phase, gpuModel, cordoned, domains, health, endpoint, util] = row;
    const old = model.nodes.get(name);
    const n = { name, rack, block, phase, model: gpuModel, cordoned: !!cordoned, domains, health, endpoint,
                util: util || [] };
    if (!old || old.rack !== rack || old.block !== block || old.health.length !== health.length ||
        old.domains.join() !== domains.join()) {
      view.layoutDirty = true;
    }
    model.nodes.set(name, n);
    view.dirty.add(name);
  }

  function deleteNode(name) {
    if (model.nodes.delete(name)) view.layoutDirty = true;
    if (view.selected === name) view.selected = null;
  }

  function jobKey(kind, ns, name) { return kind + '/' + ns + '/' + name; }

  // Adds (sign 1) or removes (sign -1) a job's placement from the per-GPU allocation.
  function account(job, sign) {
    if (!job || TERMINAL.has(job.phase)) return;
    const key = jobKey(job.kind, job.ns, job.name);
    for (const [node, gpus, milli] of job.placement) {
      let a = model.alloc.get(node);
      if (!a) model.alloc.set(node, (a = []));
      for (const g of gpus) a[g] = (a[g] || 0) + sign * milli;
      let s = model.jobsOn.get(node);
      if (!s) model.jobsOn.set(node, (s = new Set()));
      if (sign > 0) s.add(key); else s.delete(key);
      view.dirty.add(node);
    }
  }

  function setJob(row) {
    const [kind, ns, name, phase, queue, gpus, priority, placement, message, extra] = row;
    const key = jobKey(kind, ns, name);
    account(model.jobs.get(key), -1);
    const x = extra || {};
    const job = { kind, ns, name, phase, queue, gpus, priority, placement, message, scale: x.scale,
                  cluster: x.cluster || '', requeues: x.requeues || 0, failovers: x.failovers || 0,
                  reason: x.reason || '', created: x.created ? Date.parse(x.created) : NaN,
                  exitCode: x.exitCode ?? null };
    model.jobs.set(key, job);
    account(job, 1);
    view.jobsDirty = true;
  }

  function deleteJob([kind, ns, name]) {
    const key = jobKey(kind, ns, name);
    account(model.jobs.get(key), -1);
    model.jobs.delete(key);
    view.jobsDirty = true;
  }

  function apply(delta) {
    const t0 = performance.now();
    if (delta.full) {
      model.nodes.clear(); model.jobs.clear(); model.queues.clear(); model.clusters.clear();
      model.alloc.clear(); model.jobsOn.clear();
      view.layoutDirty = true;
    }
    for (const r of delta.nodes) setNode(r);
    for (const n of delta.deletedNodes) deleteNode(n);
    for (const r of delta.jobs) setJob(r);
    for (const j of delta.deletedJobs) deleteJob(j);
    // Live utilization: nodes whose heartbeat samples changed (the Node itself is
    // written only on a health change or every minute).
    for (const [name, util] of delta.samples || []) {
      const n = model.nodes.get(name);
      if (!n) continue;
      n.util = util;
      view.dirty.add(name);
    }
    for (const q of delta.queues) model.queues.set(q.metadata.name, q);
    for (const q of delta.deletedQueues) model.queues.delete(q);
    if (delta.queues.length || delta.deletedQueues.length) view.jobsDirty = true;
    // Member clusters (a federation hub; absent from servers before them).
    for (const [name, phase, gpus, free, message] of delta.clusters || []) {
      model.clusters.set(name, { name, phase, gpus, free, message });
    }
    for (const name of delta.deletedClusters || []) model.clusters.delete(name);
    if ((delta.clusters || []).length || (delta.deletedClusters || []).length) view.jobsDirty = true;
    model.rv = delta.resourceVersion;
    if (delta.samplesVersion !== undefined) model.sv = delta.samplesVersion;
    return performance.now() - t0;
  }

  // ---------------------------------------------------------------- layout

  const natural = new Intl.Collator(undefined, { numeric: true }).compare;

  // The automatic size: at least the readable minimum for the fleet's size, and larger (up to
  // 24 px) while the whole grid still fits the visible page, so a small fleet fills the page
  // instead of a corner of it (about 3 cells' area per GPU for gaps, racks and labels).
  function cellSize(gpus) {
    if (view.zoom !== 'auto') return +view.zoom;
    let base = 3;
    if (gpus <= 512) base = 14;
    else if (gpus <= 4096) base = 8;
    else if (gpus <= 20000) base = 5;
    const wrap = $('canvas-wrap');
    const w = Math.max(400, wrap.clientWidth);
    const h = Math.max(300, window.innerHeight - wrap.getBoundingClientRect().top - 16);
    const fit = Math.floor(Math.sqrt((w * h) / (Math.max(gpus, 1) * 3)));
    return Math.max(base, Math.min(24, fit));
  }

  // Positions every block, rack, node and GPU. Pure function of the model
  // and the canvas width.
  function computeLayout(width) {
    let gpus = 0;
    for (const n of model.nodes.values()) gpus += n.health.length;
    const s = cellSize(gpus);
    const gap = s >= 6 ? 2 : 1;          // between GPUs of one domain, between node rows
    const dgap = s >= 6 ? 4 : 2;         // extra gap between NVLink domains
    const pad = s >= 6 ? 5 : 3;          // inside a rack box
    const rackHead = s >= 6 ? 14 : 11;   // rack label
    const blockHead = 18;
    const rackGap = s >= 6 ? 10 : 5;
    // Node names left of their row when the cells are large enough to read them by (up to
    // ~4,000 GPUs at the automatic size); beyond, the tooltip and the detail name the node.
    const labelW = s >= 8 ? 76 : 0;

    const blocks = new Map();            // block -> rack -> [node]
    for (const n of model.nodes.values()) {
      if (!blocks.has(n.block)) blocks.set(n.block, new Map());
      const racks = blocks.get(n.block);
      if (!racks.has(n.rack)) racks.set(n.rack, []);
      racks.get(n.rack).push(n);
    }
    const L = { width, height: 0, cell: s, racks: [], blocks: [], nodes: new Map() };
    let y = 0;
    for (const block of [...blocks.keys()].sort(natural)) {
      L.blocks.push({ name: block, x: 4, y: y + 13 });
      y += blockHead;
      let x = 0, rowH = 0;
      const racks = blocks.get(block);
      for (const rack of [...racks.keys()].sort(natural)) {
        const nodes = racks.get(rack).sort((a, b) => natural(a.name, b.name));
        // Each node: GPU x offsets, domains kept adjacent (sorted by domain).
        let w = 0;
        const geo = nodes.map((n) => {
          const order = n.health.split('').map((_, i) => i);
          order.sort((a, b) => (n.domains[a] - n.domains[b]) || (a - b));
          const xs = new Array(n.health.length);
          let cx = 0;
          order.forEach((g, k) => {
            if (k > 0) cx += gap + (n.domains[g] !== n.domains[order[k - 1]] ? dgap : 0);
            xs[g] = cx;
            cx += s;
          });
          w = Math.max(w, cx);
          return { n, xs, w: cx };
        });
        const rw = Math.max(w + 2 * pad + labelW, 40);
        const rh = rackHead + nodes.length * (s + gap) - gap + pad;
        if (x > 0 && x + rw > width) { y += rowH + rackGap; x = 0; rowH = 0; }
        const box = { name: rack, block, x, y, w: rw, h: rh, nodes: [] };
        geo.forEach((g, i) => {
          const ny = y + rackHead + i * (s + gap);
          const ng = { name: g.n.name, x: x + pad + labelW, y: ny, w: g.w, h: s, xs: g.xs,
            rack: box, labelX: labelW ? x + pad : -1, labelW };
          box.nodes.push(ng);
          L.nodes.set(g.n.name, ng);
        });
        L.racks.push(box);
        x += rw + rackGap;
        rowH = Math.max(rowH, rh);
      }
      y += rowH + rackGap;
    }
    L.height = Math.max(y, 40);
    return L;
  }

  // ---------------------------------------------------------------- drawing

  function gpuColor(n, g) {
    if (view.mode === 'health') {
      if (n.health[g] === 'U') return C.unhealthy;
      if (n.phase !== 'Ready') return C.notReady;
      if (n.cordoned) return C.cordoned;
      return C.healthy;
    }
    if (n.phase !== 'Ready') return C.notReady;
    if (view.mode === 'util') {
      const u = n.util[g];
      return u === undefined || u < 0 ? C.noData : UTIL_C[utilStep(u)];
    }
    const a = model.alloc.get(n.name);
    const milli = a ? a[g] || 0 : 0;
    if (milli >= 1000) return C.full;
    if (milli > 0) return C.share;
    return C.free;
  }

  function fillRect(x, y, w, h, color) {
    const W = view.layout.width, buf = view.buf;
    for (let r = 0; r < h; r++) {
      const o = (y + r) * W + x;
      buf.fill(color, o, o + w);
    }
  }

  function paintNode(name) {
    const g = view.layout.nodes.get(name);
    const n = model.nodes.get(name);
    if (!g || !n) return null;
    const s = view.layout.cell;
    for (let i = 0; i < g.xs.length; i++) fillRect(g.x + g.xs[i], g.y, s, s, gpuColor(n, i));
    return g;
  }

  function drawLabels(ctx) {
    const L = view.layout;
    ctx.fillStyle = '#8b93a3';
    ctx.font = '12px system-ui, sans-serif';
    for (const b of L.blocks) ctx.fillText('block ' + b.name, b.x, b.y);
    ctx.font = (L.cell >= 6 ? 11 : 9) + 'px system-ui, sans-serif';
    for (const r of L.racks) ctx.fillText(r.name, r.x + 3, r.y + (L.cell >= 6 ? 11 : 9), r.w - 4);
    ctx.font = Math.min(12, L.cell - 1) + 'px ui-monospace, monospace';
    ctx.fillStyle = '#c3c9d4';
    for (const g of L.nodes.values()) {
      if (g.labelX >= 0) ctx.fillText(g.name, g.labelX, g.y + L.cell - 2, g.labelW - 6);
    }
  }

  function drawSelection(ctx) {
    const g = view.selected && view.layout.nodes.get(view.selected);
    if (!g) return;
    ctx.strokeStyle = '#ffffff';
    ctx.lineWidth = 1;
    ctx.strokeRect(g.x - 1.5, g.y - 1.5, g.w + 3, g.h + 3);
  }

  function render() {
    view.frame = 0;
    const t0 = performance.now();
    const canvas = $('fleet');
    const ctx = canvas.getContext('2d');
    let full = false, painted = 0;
    if (view.layoutDirty || !view.layout) {
      const width = Math.max(400, $('canvas-wrap').clientWidth - 2);
      view.layout = computeLayout(width);
      canvas.width = view.layout.width;
      canvas.height = view.layout.height;
      view.img = ctx.createImageData(canvas.width, canvas.height);
      view.buf = new Uint32Array(view.img.data.buffer);
      view.buf.fill(C.background);
      for (const r of view.layout.racks) fillRect(r.x, r.y, r.w, r.h, C.rack);
      for (const name of model.nodes.keys()) paintNode(name);
      view.layoutDirty = false;
      view.dirty.clear();
      full = true;
    }
    if (full || view.dirty.size > 256) {
      for (const name of view.dirty) paintNode(name);
      painted = full ? model.nodes.size : view.dirty.size;
      ctx.putImageData(view.img, 0, 0);
      drawLabels(ctx);
    } else {
      for (const name of view.dirty) {
        const g = paintNode(name);
        if (g) ctx.putImageData(view.img, 0, 0, g.x - 2, g.y - 2, g.w + 4, g.h + 4);
      }
      painted = view.dirty.size;
    }
    view.dirty.clear();
    drawSelection(ctx);
    if (view.jobsDirty) {
      renderClusters();
      renderQueues();
      renderJobs();
      view.jobsDirty = false;
    }
    renderSummary();
    if (view.selected) renderNodeDetail(false);
    const ms = performance.now() - t0;
    stats.renders++;
    stats.lastRender = { ms, full, nodes: painted };
    stats.lastRenderMs = ms;
    stats.renderedRv = model.rv;
    if (stats.firstRenderMs === null) stats.firstRenderMs = performance.now();
    document.body.dataset.rv = model.rv || '';
  }

  function scheduleRender() {
    if (!view.frame) view.frame = requestAnimationFrame(render);
  }

  // ---------------------------------------------------------------- panels

  function text(tag, s, cls) {
    const e = document.createElement(tag);
    e.textContent = s;
    if (cls) e.className = cls;
    return e;
  }

  function row(cells) {
    const tr = document.createElement('tr');
    for (const c of cells) tr.appendChild(c instanceof Node ? c : text('td', String(c)));
    return tr;
  }

  function fmtGpus(x) { return Number.isInteger(x) ? String(x) : x.toFixed(2); }

  // "n1[0-7] n2[0,2]": members grouped by node, GPU index runs collapsed.
  function fmtPlacement(placement) {
    const byNode = new Map();
    for (const [node, gpus, milli] of placement) {
      if (!byNode.has(node)) byNode.set(node, { gpus: [], milli });
      byNode.get(node).gpus.push(...gpus);
    }
    const parts = [];
    for (const [node, { gpus, milli }] of byNode) {
      gpus.sort((a, b) => a - b);
      const runs = [];
      for (let i = 0; i < gpus.length;) {
        let j = i;
        while (j + 1 < gpus.length && gpus[j + 1] === gpus[j] + 1) j++;
        runs.push(i === j ? String(gpus[i]) : gpus[i] + '-' + gpus[j]);
        i = j + 1;
      }
      parts.push(node + '[' + runs.join(',') + ']' + (milli < 1000 ? '×' + milli + 'm' : ''));
    }
    return parts.join(' ');
  }

  function renderSummary() {
    let gpus = 0, unhealthy = 0, allocated = 0;
    const racks = new Set();
    for (const n of model.nodes.values()) {
      gpus += n.health.length;
      for (const h of n.health) if (h === 'U') unhealthy++;
      racks.add(n.block + '/' + n.rack);
    }
    for (const a of model.alloc.values()) for (const m of a) if (m > 0) allocated += Math.min(m, 1000) / 1000;
    let running = 0, pending = 0;
    for (const j of model.jobs.values()) {
      if (j.placement.length && !TERMINAL.has(j.phase)) running++;
      else if (!TERMINAL.has(j.phase)) pending++;
    }
    stats.gpus = gpus; stats.nodes = model.nodes.size; stats.jobs = model.jobs.size;
    const s = $('summary');
    s.textContent = `${gpus} GPUs · ${model.nodes.size} nodes · ${racks.size} racks · ` +
      `${fmtGpus(Math.round(allocated * 100) / 100)} allocated · ${unhealthy} unhealthy · ` +
      `${running} placed / ${pending} waiting jobs` +
      (model.clusters.size ? ` · ${model.clusters.size} member clusters` : '');
    s.dataset.gpus = gpus;
    s.dataset.nodes = model.nodes.size;
    s.dataset.unhealthy = unhealthy;
  }

  function renderLegend() {
    const items = view.mode === 'health'
      ? [['healthy', 'healthy'], ['unhealthy', 'unhealthy (XID/ECC…)'], ['cordoned', 'cordoned'], ['notReady', 'node not Ready']]
      : view.mode === 'util'
        ? [['util0', '0 %'], [UTIL_HEX[5], '50 %'], ['util100', '100 % measured'], ['noData', 'not reported'],
           ['notReady', 'node not Ready']]
        : [['free', 'free'], ['share', 'shared (part of a GPU)'], ['full', 'allocated'], ['notReady', 'node not Ready']];
    const l = $('legend');
    l.textContent = '';
    for (const [k, label] of items) {
      const span = document.createElement('span');
      const i = document.createElement('i');
      i.style.background = COLORS[k] || k;
      span.append(i, label);
      l.appendChild(span);
    }
    l.appendChild(text('span', 'grouped by block → rack → node (row) → NVLink domain (adjacent cells); click a node'));
  }

  // One row per queue: what it is guaranteed (spec.gpuQuota), uses (its placed jobs' GPUs),
  // borrows beyond its guarantee, its fair share (status, from the controller), how many of its
  // jobs wait and for how long the oldest has.
  function renderQueues() {
    const usage = new Map(), pending = new Map(), oldest = new Map();
    for (const j of model.jobs.values()) {
      if (TERMINAL.has(j.phase)) continue;
      if (j.placement.length) {
        let g = 0;
        for (const [, gpus, milli] of j.placement) g += gpus.length * Math.min(milli, 1000) / 1000;
        usage.set(j.queue, (usage.get(j.queue) || 0) + g);
      } else {
        pending.set(j.queue, (pending.get(j.queue) || 0) + 1);
        if (!Number.isNaN(j.created) && !(oldest.get(j.queue) <= j.created)) oldest.set(j.queue, j.created);
      }
    }
    const names = new Set([...model.queues.keys(), ...usage.keys(), ...pending.keys()]);
    const tbody = $('queues').tBodies[0];
    tbody.textContent = '';
    for (const name of [...names].sort(natural)) {
      const q = model.queues.get(name);
      const spec = (q && q.spec) || {};
      const st = (q && q.status) || {};
      const quota = spec.gpuQuota || null;
      const guaranteed = quota ? Object.entries(quota).map(([k, v]) => `${k}: ${v}`).join(', ') : '—';
      const used = usage.get(name) || 0;
      // Borrowed: per GPU model beyond its quota (the controller's per-model allocation when it
      // reports one), else beyond the queue's total guarantee.
      let borrowed = 0;
      if (quota && st.gpusAllocated && typeof st.gpusAllocated === 'object') {
        for (const [m, n] of Object.entries(st.gpusAllocated)) borrowed += Math.max(0, n - (quota[m] || 0));
      } else if (quota) {
        borrowed = Math.max(0, used - Object.values(quota).reduce((a, b) => a + b, 0));
      }
      const share = typeof st.fairShare === 'number' ? st.fairShare.toFixed(2) : '—';
      const tr = row([name, spec.weight ?? (q ? 1 : '—'), guaranteed, fmtGpus(used),
        quota ? fmtGpus(borrowed) : '—', share, pending.get(name) || 0,
        oldest.has(name) ? fmtAge(oldest.get(name)) : '—']);
      tr.dataset.queue = name;
      if (borrowed > 0) tr.dataset.borrowing = 'true';
      tbody.appendChild(tr);
    }
  }

  // A federation hub's member clusters (Cluster objects); hidden when there are none.
  function renderClusters() {
    const section = $('clusters-section');
    section.hidden = model.clusters.size === 0;
    const tbody = $('clusters').tBodies[0];
    tbody.textContent = '';
    for (const name of [...model.clusters.keys()].sort(natural)) {
      const c = model.clusters.get(name);
      const tr = row([name, text('td', c.phase || 'Unknown', c.phase), c.gpus, c.free, c.message || '—']);
      tr.dataset.cluster = name;
      tr.dataset.phase = c.phase;
      tbody.appendChild(tr);
    }
    $('clusters-count').textContent = '(' + model.clusters.size + ')';
    // A hub has no nodes of its own: say so where the GPUs would be.
    $('hub-note').hidden = !(model.clusters.size && !model.nodes.size);
  }

  // What only some jobs have, under the name: an autoscaled service's replicas bound of
  // desired and its mean p99 against the target (red when over); on a federation hub the
  // member running the job and how often it was moved.
  function jobDetails(j) {
    const parts = [];
    if (j.scale) {
      const [bound, desired, min, max, target, p99, fresh] = j.scale;
      parts.push(text('span', `${bound}/${desired ?? '–'} replicas (min ${min}, max ${max})`, 'scale'));
      const over = p99 !== null && target !== null && p99 > target;
      const p = text('span', 'p99 ' + (p99 === null ? '–' : Math.round(p99)) + ' ms' +
        (target !== null ? ` / ${target} ms` : ''), 'p99' + (over ? ' over' : ''));
      p.title = p99 === null ? 'no fresh replica readings'
        : `mean of ${fresh} fresh replica reading${fresh === 1 ? '' : 's'} against the SLO target`;
      parts.push(p);
    }
    if (j.cluster) parts.push(text('span', 'cluster ' + j.cluster, 'cluster'));
    if (j.requeues) parts.push(text('span', 'requeues ' + j.requeues, 'moves'));
    if (j.failovers) parts.push(text('span', 'failovers ' + j.failovers, 'moves'));
    if (!parts.length) return null;
    const div = document.createElement('div');
    div.className = 'sub';
    div.append(...parts);
    return div;
  }

  const PHASE_ORDER = { Running: 0, Ready: 0, Degraded: 0, Deploying: 1, Scheduled: 1, Admitted: 2, Queued: 3, Pending: 3 };

  // kubectl's AGE: 42s, 5m, 3h, 2d.
  function fmtAge(t) {
    if (Number.isNaN(t)) return '—';
    const s = Math.max(0, Math.floor((Date.now() - t) / 1000));
    if (s < 120) return s + 's';
    if (s < 7200) return Math.floor(s / 60) + 'm';
    if (s < 172800) return Math.floor(s / 3600) + 'h';
    return Math.floor(s / 86400) + 'd';
  }

  // The bounded reason word; a failed job's exit code with it.
  function fmtReason(j) {
    let r = j.reason || '';
    if (j.exitCode !== null) r = (r ? r + ' ' : '') + '(exit ' + j.exitCode + ')';
    return r || '—';
  }

  function renderJobs() {
    const f = $('job-filter').value.trim().toLowerCase();
    let jobs = [...model.jobs.values()];
    if (f) {
      jobs = jobs.filter((j) => (j.ns + '/' + j.name + ' ' + j.queue + ' ' + j.phase + ' ' + j.reason + ' ' + j.cluster + ' ' +
        j.placement.map((p) => p[0]).join(' ')).toLowerCase().includes(f));
    }
    jobs.sort((a, b) => ((PHASE_ORDER[a.phase] ?? 5) - (PHASE_ORDER[b.phase] ?? 5)) ||
      natural(a.ns + '/' + a.name, b.ns + '/' + b.name));
    const max = 300;
    const tbody = $('jobs').tBodies[0];
    tbody.textContent = '';
    const frag = document.createDocumentFragment();
    for (const j of jobs.slice(0, max)) {
      const name = text('td', j.ns + '/' + j.name);
      name.title = (j.kind === 'T' ? 'TrainingJob' : 'InferenceService') + ', priority ' + j.priority +
        (j.message ? '\n' + j.message : '');
      const details = jobDetails(j);
      if (details) name.appendChild(details);
      const reason = text('td', fmtReason(j), 'reason');
      if (j.message) reason.title = j.message;  // the prose stays a hover away
      const tr = row([name, text('td', j.phase, j.phase), reason, j.queue, fmtGpus(j.gpus),
        fmtAge(j.created), j.placement.length ? fmtPlacement(j.placement) : '—']);
      tr.dataset.job = j.ns + '/' + j.name;
      tr.dataset.phase = j.phase;
      frag.appendChild(tr);
    }
    tbody.appendChild(frag);
    $('jobs-count').textContent = '(' + model.jobs.size + ')';
    $('jobs-more').textContent = jobs.length > max ? `showing ${max} of ${jobs.length}; filter to narrow` : '';
  }

  // The full Node object (heartbeat, GPU messages) is fetched on open.
  let detailObject = null;

  // The node's per-minute utilization of the last hour (GET /api/v1/nodes/NAME/utilization),
  // fetched on open and again when the panel redraws a minute later.
  let detailHistory = null;
  async function fetchHistory(name) {
    try {
      const h = await api('/api/v1/nodes/' + encodeURIComponent(name) + '/utilization');
      if (view.selected !== name) return;
      detailHistory = { node: name, at: Date.now(), gpus: h.gpus || [] };
      renderNodeDetail(true);
    } catch (_) { /* the sparklines stay out; the rest of the panel is there */ }
  }

  // A 60 x 14 sparkline of one GPU's minutes (0..100 %, gaps where none was reported).
  function sparkline(points) {
    const NS = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('width', '60');
    svg.setAttribute('height', '14');
    svg.setAttribute('class', 'spark');
    let d = '', pen = false, n = 0;
    points.forEach((v, i) => {
      if (v < 0) { pen = false; return; }
      d += (pen ? 'L' : 'M') + i + ' ' + (13 - v * 12 / 100).toFixed(1) + ' ';
      pen = true;
      n++;
    });
    if (n === 1) d += 'h1.5';  // a lone minute: a dot, not an invisible point
    const path = document.createElementNS(NS, 'path');
    path.setAttribute('d', d || 'M0 13');
    svg.appendChild(path);
    svg.dataset.points = String(n);
    const title = document.createElementNS(NS, 'title');
    title.textContent = 'utilization, last hour, one point per minute';
    svg.appendChild(title);
    return svg;
  }

  async function openNode(name) {
    view.selected = name;
    detailObject = null;
    detailHistory = null;
    fetchHistory(name);
    view.dirty.add(name);
    view.layoutDirty = true;  // selection outline: repaint everything once
    renderNodeDetail(true);
    scheduleRender();
    try {
      detailObject = await api('/api/v1/nodes/' + encodeURIComponent(name));
      if (view.selected === name) renderNodeDetail(true);
    } catch (e) {
      detailObject = { error: e.message };
    }
  }

  function renderNodeDetail(force) {
    const n = model.nodes.get(view.selected);
    const panel = $('node-detail');
    if (!n) { panel.hidden = true; return; }
    const seen = model.rv + '/' + model.sv;
    if (!force && panel.dataset.rv === seen) return;
    panel.dataset.rv = seen;
    panel.hidden = false;
    panel.dataset.node = n.name;
    $('node-title').textContent = 'Node ' + n.name;
    const facts = $('node-facts');
    facts.textContent = '';
    const st = detailObject && detailObject.status;
    const msgs = {};
    if (st && st.gpus) for (const g of st.gpus) msgs[g.index] = g.message || '';
    for (const [k, v] of [['phase', n.phase], ['block / rack', n.block + ' / ' + n.rack], ['GPU model', n.model],
      ['cordoned', n.cordoned ? 'yes' : 'no'], ['agent', n.endpoint || '—'],
      ['last heartbeat', (st && st.lastHeartbeatTime) || '…']]) {
      facts.append(text('dt', k), text('dd', v, k === 'phase' ? v : ''));
    }
    if (detailHistory && detailHistory.node === n.name && Date.now() - detailHistory.at > 60000) {
      detailHistory.at = Date.now();
      fetchHistory(n.name);
    }
    const tbody = $('node-gpus').tBodies[0];
    tbody.textContent = '';
    const a = model.alloc.get(n.name) || [];
    const on = model.jobsOn.get(n.name) || new Set();
    for (let g = 0; g < n.health.length; g++) {
      const jobs = [];
      for (const key of on) {
        const j = model.jobs.get(key);
        if (j && j.placement.some(([node, gpus]) => node === n.name && gpus.includes(g))) jobs.push(j.ns + '/' + j.name);
      }
      const health = n.health[g] === 'U' ? 'Unhealthy' : 'Healthy';
      const h = text('td', health + (msgs[g] ? ' — ' + msgs[g] : ''), health);
      const u = text('td', n.util[g] === undefined || n.util[g] < 0 ? '—' : n.util[g] + ' %', 'util');
      if (detailHistory && detailHistory.node === n.name && detailHistory.gpus[g]) {
        u.append(' ', sparkline(detailHistory.gpus[g]));
      }
      const tr = row([g, n.domains[g], h, a[g] ? (a[g] / 1000).toFixed(a[g] % 1000 ? 2 : 0) : '0', u,
                      jobs.join(', ') || '—']);
      tr.dataset.gpu = g;
      tr.dataset.health = health;
      tbody.appendChild(tr);
    }
  }

  // ---------------------------------------------------------------- input

  function hit(x, y) {
    const L = view.layout;
    if (!L) return null;
    for (const r of L.racks) {
      if (x < r.x || x >= r.x + r.w || y < r.y || y >= r.y + r.h) continue;
      for (const g of r.nodes) {
        if (y < g.y - 1 || y > g.y + g.h) continue;
        let gpu = -1;
        for (let i = 0; i < g.xs.length; i++) {
          if (x >= g.x + g.xs[i] - 1 && x <= g.x + g.xs[i] + L.cell) gpu = i;
        }
        return { node: g.name, gpu };
      }
      return null;
    }
    return null;
  }

  function canvasXY(ev) {
    const r = $('fleet').getBoundingClientRect();
    return [Math.floor(ev.clientX - r.left), Math.floor(ev.clientY - r.top)];
  }

  function setupInput() {
    const canvas = $('fleet');
    canvas.addEventListener('click', (ev) => {
      const h = hit(...canvasXY(ev));
      if (h) openNode(h.node);
    });
    canvas.addEventListener('mousemove', (ev) => {
      const h = hit(...canvasXY(ev));
      const tip = $('tooltip');
      if (!h || h.gpu < 0) { tip.hidden = true; return; }
      const n = model.nodes.get(h.node);
      const a = (model.alloc.get(h.node) || [])[h.gpu] || 0;
      const u = n.util[h.gpu];
      tip.textContent = `${n.name} GPU ${h.gpu} (NVLink domain ${n.domains[h.gpu]})\n` +
        `${n.model}\n${n.health[h.gpu] === 'U' ? 'Unhealthy' : 'Healthy'}, node ${n.phase}` +
        `\nallocated ${(a / 1000).toFixed(2)}, utilization ` +
        (u === undefined || u < 0 ? 'not reported' : `${u} %`);
      tip.style.left = ev.clientX + 14 + 'px';
      tip.style.top = ev.clientY + 14 + 'px';
      tip.hidden = false;
    });
    canvas.addEventListener('mouseleave', () => { $('tooltip').hidden = true; });
    $('mode').addEventListener('change', (e) => {
      view.mode = e.target.value;
      view.layoutDirty = true;
      renderLegend();
      scheduleRender();
    });
    $('zoom').addEventListener('change', (e) => {
      view.zoom = e.target.value;
      view.layoutDirty = true;
      scheduleRender();
    });
    $('job-filter').addEventListener('input', () => { view.jobsDirty = true; scheduleRender(); });
    $('node-close').addEventListener('click', () => {
      view.selected = null;
      $('node-detail').hidden = true;
      view.layoutDirty = true;
      scheduleRender();
    });
    let resize = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resize);
      resize = setTimeout(() => { view.layoutDirty = true; scheduleRender(); }, 150);
    });
    $('login-form').addEventListener('submit', (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
      start();
    });
    $('signout').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      location.reload();
    });
  }

  // ---------------------------------------------------------------- data loop

  let generation = 0;  // a new start() ends the previous loop

  function showLogin(why) {
    $('app').hidden = true;
    $('login').hidden = false;
    $('login-why').textContent = why;
    $('token').focus();
  }

  function showError(msg) {
    const e = $('error');
    e.textContent = msg;
    e.hidden = !msg;
  }

  // Kiosk use: a token in the URL fragment (/ui/#token=T; a fragment never reaches the server
  // nor its logs) is kept like a typed one, then dropped from the address bar.
  function tokenFromFragment() {
    const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (!m) return;
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }

  // Colour by measured utilization only when some GPU reports it; else by allocation (a fleet
  // without agents' samples would be all grey). Once: a choice the user makes stays.
  let modeChosen = false;
  function pickDefaultMode() {
    if (modeChosen) return;
    modeChosen = true;
    let measured = false;
    for (const n of model.nodes.values()) {
      if ((n.util || []).some((u) => u >= 0)) { measured = true; break; }
    }
    const mode = measured ? 'util' : 'alloc';
    if ($('mode').value !== mode) {
      $('mode').value = mode;
      $('mode').dispatchEvent(new Event('change'));
    }
  }

  async function start() {
    const gen = ++generation;
    $('login').hidden = true;
    showError('');
    let delta;
    const t0 = performance.now();
    try {
      delta = await api('/api/v1/fleet');
    } catch (e) {
      if (e.status === 401) return showLogin(token() ? 'That token was not accepted: ' + e.message : 'This server requires a bearer token.');
      if (e.status === 403) return showLogin('This token may not view the fleet: ' + e.message);
      showError('Cannot load the fleet: ' + e.message + ' (retrying)');
      setTimeout(() => gen === generation && start(), 2000);
      return;
    }
    stats.fullFetchMs = performance.now() - t0;
    $('app').hidden = false;
    $('signout').hidden = !token();
    apply(delta);
    pickDefaultMode();
    render();  // first full render now, not on the next frame
    poll(gen);
  }

  async function poll(gen) {
    let failures = 0;
    while (gen === generation) {
      let delta;
      try {
        delta = await api('/api/v1/fleet?resourceVersion=' + model.rv + '&samplesVersion=' +
          model.sv + '&waitSeconds=5');
        failures = 0;
        $('live').className = 'on';
        showError('');
      } catch (e) {
        if (e.status === 401 || e.status === 403) return showLogin('Session ended: ' + e.message);
        failures++;
        $('live').className = 'off';
        showError('Live updates interrupted: ' + e.message + ' (retrying)');
        await new Promise((r) => setTimeout(r, Math.min(500 * failures, 5000)));
        continue;
      }
      if (gen !== generation) return;
      const changed = delta.full || delta.nodes.length || delta.jobs.length || delta.queues.length ||
        delta.deletedNodes.length || delta.deletedJobs.length || delta.deletedQueues.length ||
        (delta.clusters && delta.clusters.length) || (delta.deletedClusters && delta.deletedClusters.length) ||
        (delta.samples && delta.samples.length);
      const applyMs = apply(delta);
      if (changed) {
        stats.updates++;
        stats.lastApplyMs = applyMs;
        scheduleRender();
      } else {
        stats.renderedRv = model.rv;
        document.body.dataset.rv = model.rv;
      }
    }
  }

  window.tessera = {
    stats,
    model,
    // The cell of GPU `gpu` of `node` in canvas pixels, or null.
    cellAt(node, gpu) {
      const g = view.layout && view.layout.nodes.get(node);
      if (!g || g.xs[gpu] === undefined) return null;
      return { x: g.x + g.xs[gpu], y: g.y, w: view.layout.cell, h: view.layout.cell };
    },
    // Where `node`'s name is drawn left of its row, or null when names are not drawn.
    labelAt(node) {
      const g = view.layout && view.layout.nodes.get(node);
      if (!g || g.labelX < 0) return null;
      return { x: g.labelX, y: g.y, w: g.labelW - 6, h: view.layout.cell };
    },
    colors: COLORS,
    utilColors: UTIL_HEX,  // UTIL_HEX[i]: measured utilization i*10 %
  };

  tokenFromFragment();
  setupInput();
  renderLegend();
  start();
})();
