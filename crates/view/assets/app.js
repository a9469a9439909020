'use strict';
// tickscope view: the page. Everything it shows comes from this server's /api (the token in
// the URL authorises each request); nothing is fetched from anywhere else.

const TOKEN = new URLSearchParams(location.search).get('token') || '';
const $ = (id) => document.getElementById(id);

// ---- Utilities ---------------------------------------------------------------------------

function query(params) {
  const q = new URLSearchParams({ token: TOKEN });
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null) q.set(k, v);
  return q.toString();
}

async function api(path, params, binary) {
  const r = await fetch(`/api/${path}?${query(params)}`);
  if (r.status === 202) {
    const e = new Error('pending');
    e.status = 202;
    throw e;
  }
  if (!r.ok) {
    let msg = `${r.status}`;
    try { msg = (await r.json()).error || msg; } catch (_) { /* not JSON */ }
    const e = new Error(msg);
    e.status = r.status;
    throw e;
  }
  return binary ? r.arrayBuffer() : r.json();
}

// Durations as tickscope prints them (tickscope_fmt::duration): three significant digits.
function dur(ns) {
  if (!Number.isFinite(ns) || ns < 0) return '-';
  if (ns < 999.5) return `${Math.round(ns)} ns`;
  let v, u;
  if (ns < 999.5e3) { v = ns / 1e3; u = 'µs'; } else if (ns < 999.5e6) { v = ns / 1e6; u = 'ms'; } else { v = ns / 1e9; u = 's'; }
  return `${v < 9.995 ? v.toFixed(2) : v < 99.95 ? v.toFixed(1) : v.toFixed(0)} ${u}`;
}

// A time since the capture's start, with as many decimals as `step` (ns) needs.
function fmtAt(ns, step) {
  const [scale, unit] = Math.abs(ns) >= 1e9 || step >= 1e8 ? [1e9, 's'] : Math.abs(ns) >= 1e6 || step >= 1e5 ? [1e6, 'ms'] : [1e3, 'µs'];
  const digits = Math.max(0, Math.min(6, Math.ceil(-Math.log10(Math.max(step, 1) / scale))));
  return `${(ns / scale).toFixed(digits)} ${unit}`;
}

function count(n) {
  return n.toLocaleString('en-US');
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k);
  return e;
}

// A colour per name: distinct hues for neighbours, stable across reloads.
function hue(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  return ((h >>> 0) % 360);
}
function colour(s, light) {
  return `hsl(${hue(s)}, 62%, ${light || 72}%)`;
}
// A capture's scope by id: ids are small and dense, so golden-angle steps keep neighbours
// apart.
function scopeColour(id, light) {
  return `hsl(${Math.round((id * 137.508) % 360)}, 60%, ${light || 72}%)`;
}

// Text that fits `w` pixels, cut with an ellipsis.
function fit(ctx, text, w) {
  if (w < 14) return '';
  if (ctx.measureText(text).width <= w) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, mid) + '…').width <= w) lo = mid; else hi = mid - 1;
  }
  return lo > 0 ? text.slice(0, lo) + '…' : '';
}

function setupCanvas(canvas) {
  const r = canvas.getBoundingClientRect();
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.floor(r.width)), h = Math.max(1, Math.floor(r.height));
  if (canvas.width !== Math.floor(w * dpr) || canvas.height !== Math.floor(h * dpr)) {
    canvas.width = Math.floor(w * dpr);
    canvas.height = Math.floor(h * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  return { ctx, w, h };
}

// ---- State and the URL ---------------------------------------------------------------------

const S = {
  info: null,
  tab: 'timeline',
  c: 0, // capture shown
  p: 0, // profile shown
  pv: 'flame', // profile view
  fn: null, // function of the sandwich and source views
  from: null, until: null, // timeline window, ns
  sel: null, // selected range [from, until]
  scrollY: 0,
  follow: false,
  highlight: null, // scope id
};

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.get('t')) S.tab = h.get('t');
  for (const k of ['c', 'p']) if (h.get(k) !== null) S[k] = Number(h.get(k)) || 0;
  if (h.get('pv')) S.pv = h.get('pv');
  if (h.get('fn')) S.fn = h.get('fn');
  if (h.get('from') && h.get('until')) { S.from = Number(h.get('from')); S.until = Number(h.get('until')); }
  if (h.get('sel')) {
    const [a, b] = h.get('sel').split(',').map(Number);
    if (b > a) S.sel = [a, b];
  }
}

let hashTimer = 0;
function writeHash() {
  clearTimeout(hashTimer);
  hashTimer = setTimeout(() => {
    const h = new URLSearchParams({ t: S.tab });
    if (S.tab === 'timeline') {
      h.set('c', S.c);
      if (S.from !== null) { h.set('from', Math.round(S.from)); h.set('until', Math.round(S.until)); }
      if (S.sel) h.set('sel', `${Math.round(S.sel[0])},${Math.round(S.sel[1])}`);
    } else if (S.tab === 'profile') {
      h.set('p', S.p);
      h.set('pv', S.pv);
      if (S.fn) h.set('fn', S.fn);
    }
    history.replaceState(null, '', `${location.pathname}${location.search}#${h}`);
  }, 100);
}

// ---- Tabs and the banner -----------------------------------------------------------------

function buildTabs() {
  const nav = $('tabs');
  nav.textContent = '';
  const add = (label, tab, extra) => {
    const b = el('button', { role: 'tab', text: label, onclick: () => show(tab, extra) });
    b.dataset.tab = tab;
    if (extra !== undefined) b.dataset.extra = extra;
    nav.append(b);
  };
  S.info.captures.forEach((c, i) => add(`Timeline: ${short(c.name)}`, 'timeline', i));
  S.info.profiles.forEach((p, i) => {
    if (S.info.diff && (i === S.info.diff.base || i === S.info.diff.new)) return;
    add(`Profile: ${short(p.name)}`, 'profile', i);
  });
  if (S.info.diff) add('Diff', 'diff');
}

function short(path) {
  return String(path).split('/').pop();
}

function markTabs() {
  for (const b of $('tabs').children) {
    const on = b.dataset.tab === S.tab && (b.dataset.extra === undefined || Number(b.dataset.extra) === (S.tab === 'timeline' ? S.c : S.p));
    b.classList.toggle('on', on);
    b.setAttribute('aria-selected', on);
  }
}

function show(tab, extra) {
  S.tab = tab;
  if (tab === 'timeline' && extra !== undefined && extra !== S.c) { S.c = extra; S.from = S.until = null; S.sel = null; TL.answer = null; TL.summaryFor = null; }
  if (tab === 'profile' && extra !== undefined && extra !== S.p) { S.p = extra; S.fn = null; PF.loaded = null; }
  for (const s of document.querySelectorAll('.tab')) s.hidden = s.id !== tab;
  markTabs();
  banner();
  writeHash();
  if (tab === 'timeline') TL.open();
  else if (tab === 'profile') PF.open();
  else if (tab === 'diff') DF.open();
}

function banner() {
  const b = $('banner');
  b.textContent = '';
  const lines = [];
  if (S.tab === 'timeline') {
    const c = S.info.captures[S.c];
    if (c) {
      if (c.status.error) lines.push(`${c.name}: ${c.status.error}`);
      for (const w of c.status.warnings) lines.push(`This capture is incomplete: ${w}. It is shown up to its last good chunk.`);
      const lost = TL.summary && TL.summary.lost;
      if (lost && (lost.dropped || lost.undelivered)) {
        lines.push(`The program lost ${count(lost.dropped)} events past its memory budget and ${count(lost.undelivered)} in chunks its sink could not take: the red marks on the timeline show where; scopes were dropped whole (${count(lost.dropped_scopes)}), so every figure is of whole calls.`);
      }
    }
  } else if (S.tab === 'profile') {
    const p = S.info.profiles[S.p];
    if (p) for (const n of p.notes) lines.push(n);
  }
  // Live connections refused or cut (the viewer's limits), the latest few.
  const n = S.info.notices;
  if (S.tab === 'timeline' && n && n.count) {
    for (const l of n.latest.slice(-3)) lines.push(`Live captures: ${l}.`);
    if (n.count > 3) lines.push(`(${count(n.count)} such notices in all: see the viewer's stderr.)`);
  }
  for (const l of lines) b.append(el('p', { text: l }));
  b.hidden = lines.length === 0;
}

// ---- Flame graphs (profile, samples of a range, diff) -----------------------------------

class Flame {
  constructor(canvas, opts) {
    this.canvas = canvas;
    this.opts = opts || {};
    this.tree = null;
    this.root = 0;
    this.match = null;
    this.rowH = 17;
    canvas.addEventListener('mousemove', (e) => this.hover(e));
    canvas.addEventListener('mouseleave', () => this.tip(null));
    canvas.addEventListener('click', (e) => this.click(e));
    canvas.addEventListener('dblclick', (e) => {
      const n = this.hit(e);
      if (n > 0 && this.opts.onPick) this.opts.onPick(this.name(n));
    });
  }

  set(tree) {
    this.tree = tree;
    this.root = 0;
    const n = tree.parent.length;
    // x offsets within the parent, children in order (parents come before children).
    this.x = new Float64Array(n);
    const next = new Float64Array(n);
    this.maxDepth = 0;
    this.depth = new Uint16Array(n);
    for (let i = 1; i < n; i++) {
      const p = tree.parent[i];
      this.x[i] = next[p] + this.x[p];
      next[p] += this.width(i);
      this.depth[i] = this.depth[p] + 1;
      if (this.depth[i] > this.maxDepth) this.maxDepth = this.depth[i];
    }
    this.draw();
  }

  width(i) {
    const t = this.tree;
    return this.opts.diff ? Math.max(t.cum[i], 0) : t.cum[i];
  }

  name(i) {
    return i === 0 ? 'all' : this.tree.names[this.tree.name[i]];
  }

  isAncestor(a, b) { // a is b or above it
    const t = this.tree;
    while (b !== 0 && b !== a) b = t.parent[b];
    return b === a;
  }

  draw() {
    const t = this.tree;
    if (!t) return;
    // As tall as the deepest stack needs (the box scrolls), at least the box.
    const box = this.canvas.parentElement;
    const need = (this.maxDepth - this.depth[this.root] + 1) * this.rowH + 4;
    const tall = Math.max(box.clientHeight, need);
    const icicleNow = !!this.opts.icicle();
    if (this.canvas.style.height !== `${tall}px` || this.wasIcicle !== icicleNow) {
      this.canvas.style.height = `${tall}px`;
      // The root in view: at the bottom of a flame graph, the top of an icicle.
      box.scrollTop = icicleNow ? 0 : box.scrollHeight;
      this.wasIcicle = icicleNow;
    }
    const { ctx, w, h } = setupCanvas(this.canvas);
    ctx.clearRect(0, 0, w, h);
    const rootW = this.width(this.root) || 1;
    const scale = w / rootW;
    const x0 = this.x[this.root];
    const d0 = this.depth[this.root];
    const icicle = !!this.opts.icicle();
    const y = (d) => (icicle ? (d - d0) * this.rowH : h - (d - d0 + 1) * this.rowH);
    let maxDelta = 1;
    if (this.opts.diff) {
      for (let i = 1; i < t.cum.length; i++) maxDelta = Math.max(maxDelta, Math.abs(t.cum[i] - t.base_cum[i]));
    }
    this.drawn = [];
    for (let i = 0; i < t.parent.length; i++) {
      const wi = this.width(i);
      if (wi <= 0) continue;
      const px = (this.x[i] - x0) * scale;
      const pw = wi * scale;
      if (pw < 0.5 || px + pw < 0 || px > w) continue;
      if (i !== this.root && !this.isAncestor(this.root, i) && !this.isAncestor(i, this.root)) continue;
      const yy = y(this.depth[i]);
      if (yy < -this.rowH || yy > h) continue;
      let fill;
      const name = this.name(i);
      if (this.opts.diff) {
        const d = (t.cum[i] - t.base_cum[i]) / maxDelta;
        fill = d > 0 ? `hsl(0, ${Math.round(30 + 60 * d)}%, ${Math.round(88 - 30 * d)}%)` : d < 0 ? `hsl(215, ${Math.round(30 - 60 * d)}%, ${Math.round(88 + 30 * d)}%)` : '#e9e9ea';
      } else {
        fill = i === 0 ? '#d8d9dc' : colour(name, this.match && !this.match.test(name) ? 90 : 70);
      }
      if (this.match && this.match.test(name) && !this.opts.diff) fill = 'hsl(300, 70%, 62%)';
      ctx.fillStyle = fill;
      ctx.fillRect(Math.max(px, 0), yy, Math.min(pw, w) - 0.5, this.rowH - 1);
      this.drawn.push(i);
      if (pw > 24) {
        ctx.fillStyle = '#1d1f21';
        ctx.fillText(fit(ctx, i === 0 ? `all (${this.value(t.cum[0])})` : name, pw - 6), Math.max(px, 0) + 3, yy + this.rowH / 2);
      }
    }
  }

  value(v) {
    const t = this.tree;
    if (t.unit === 'nanoseconds') return dur(v);
    if (t.unit === 'bytes') return `${(v / 1e6).toFixed(2)} MB`;
    return `${count(v)} ${t.sample_type === 'samples' ? 'samples' : t.unit}`;
  }

  hit(e) {
    const t = this.tree;
    if (!t) return -1;
    const r = this.canvas.getBoundingClientRect();
    const mx = e.clientX - r.left, my = e.clientY - r.top;
    const w = r.width, h = r.height;
    const rootW = this.width(this.root) || 1;
    const scale = w / rootW;
    const d0 = this.depth[this.root];
    const icicle = !!this.opts.icicle();
    const d = icicle ? Math.floor(my / this.rowH) + d0 : Math.floor((h - my) / this.rowH) + d0;
    for (const i of this.drawn || []) {
      if (this.depth[i] !== d) continue;
      const px = (this.x[i] - this.x[this.root]) * scale;
      if (mx >= px && mx < px + this.width(i) * scale) return i;
    }
    return -1;
  }

  tip(e, i) {
    const tip = this.opts.tip;
    if (!tip) return;
    if (!e || i < 0) { tip.hidden = true; return; }
    const t = this.tree;
    const pct = (v) => (t.cum[0] ? (100 * v / t.cum[0]).toFixed(2) : '0') + '%';
    let text = `${this.name(i)}\n${this.value(t.cum[i])} (${pct(t.cum[i])}) · self ${this.value(t.flat[i])}`;
    if (this.opts.diff) text = `${this.name(i)}\nnew ${this.value(t.cum[i])} · base ${this.value(t.base_cum[i])} · change ${t.cum[i] - t.base_cum[i] >= 0 ? '+' : ''}${this.value(t.cum[i] - t.base_cum[i]).replace(/^-/, '−')}`;
    tip.textContent = text;
    tip.hidden = false;
    const box = tip.parentElement.getBoundingClientRect();
    tip.style.left = `${Math.min(e.clientX - box.left + 12, box.width - 300)}px`;
    tip.style.top = `${e.clientY - box.top + 14}px`;
  }

  hover(e) {
    this.tip(e, this.hit(e));
  }

  click(e) {
    const i = this.hit(e);
    if (i < 0) return;
    this.root = i === this.root ? this.tree.parent[i] : i;
    if (this.opts.onZoom) this.opts.onZoom(this.root === 0 ? null : this.name(this.root));
    this.draw();
  }

  search(re) {
    this.match = re;
    this.draw();
  }
}

function flameBox(canvas) {
  const box = canvas.parentElement;
  let tip = box.querySelector('.tip');
  if (!tip) {
    tip = el('div', { class: 'tip', hidden: true });
    tip.id = '';
    tip.style.cssText = 'position:absolute;pointer-events:none;background:rgba(29,31,33,.92);color:#fff;padding:4px 8px;border-radius:3px;font-size:12px;white-space:pre-wrap;z-index:2';
    box.append(tip);
  }
  return tip;
}

// ---- Tables -----------------------------------------------------------------------------

// A table of `rows`; columns: {key, label, num, text(row), value(row), title}; sortable.
function table(cols, rows, opts) {
  opts = opts || {};
  const t = el('table', { class: opts.class });
  const head = el('tr');
  let sortKey = opts.sort || null;
  const tbody = el('tbody');
  const fill = () => {
    tbody.textContent = '';
    let rs = rows;
    if (sortKey) {
      const c = cols.find((c) => c.key === sortKey);
      rs = [...rows].sort((a, b) => (c.num ? (c.value(b) - c.value(a)) : String(c.value(a)).localeCompare(String(c.value(b)))));
    }
    for (const r of rs) {
      const tr = el('tr', { class: opts.onPick ? 'pick' : null, onclick: opts.onPick ? () => opts.onPick(r) : null });
      for (const c of cols) {
        const td = el('td', { class: c.num ? 'num' : c.key === 'name' ? 'name' : null, title: c.title ? c.title(r) : null });
        if (c.html) td.append(c.html(r)); else td.textContent = c.text ? c.text(r) : String(c.value(r));
        if (c.value) td.dataset.value = c.value(r);
        td.dataset.col = c.key;
        tr.append(td);
      }
      tbody.append(tr);
    }
    for (const th of head.children) th.classList.toggle('sorted', th.dataset.key === sortKey);
  };
  for (const c of cols) {
    const th = el('th', { class: `${c.num ? 'num ' : ''}${opts.sortable ? 'sortable' : ''}`, text: c.label, title: c.help });
    th.dataset.key = c.key;
    if (opts.sortable) th.addEventListener('click', () => { sortKey = c.key; fill(); });
    head.append(th);
  }
  t.append(el('thead', {}, head), tbody);
  fill();
  return t;
}

// ---- The timeline -----------------------------------------------------------------------

const GUTTER = 180, RULER = 24, ROW = 16, HEAD = 18, SAMPLES = 10, COUNTER = 34, LANE = 12, NARROW = 6;
// How a life ended (the server's codes).
const HOW = ['ended', 'cancelled', 'still alive at the capture\'s end', 'begun before the capture started'];

const TL = {
  answer: null, // the last answer, decoded
  lives: null, // the last answer's futures' and spans' lives, by call site
  lanes: {}, // the most lanes each call site's lives have needed, so tracks do not jump
  inflight: false, again: false,
  summary: null, summaryFor: null,
  drag: null,
  layout: [],
  ready: false,

  capture() { return S.info ? S.info.captures[S.c] : null; },

  // The status line: the capture's program, size and state.
  showStatus(c) {
    $('status').textContent = `${c.program || ''} (pid ${c.pid}) · ${count(c.events)} events · ${c.threads.length} threads${c.live ? (c.status.done ? ' · connection ended' : ' · live') : ''}`;
  },

  open() {
    const c = this.capture();
    if (!c) return;
    if (!c.threads) { // still indexing
      $('status').textContent = c.status.error ? 'failed' : `indexing ${c.name}: ${Math.round(100 * c.status.read / Math.max(c.status.size, 1))}%`;
      setTimeout(async () => { await refreshInfo(); if (S.tab === 'timeline') this.open(); }, 150);
      this.draw();
      return;
    }
    this.showStatus(c);
    if (S.from === null || S.until === null || S.until <= S.from) {
      this.whole();
      // A capture still arriving: keep its end in view until the user says otherwise.
      if (c.live && !c.status.done && !this.followSet) { S.follow = true; this.followSet = true; }
    }
    $('tl-follow').checked = S.follow;
    this.fetch();
    this.loadSummary();
    this.draw();
  },

  whole() {
    const c = this.capture();
    const d = Math.max(c.duration_ns, 1000);
    S.from = 0;
    S.until = d * 1.02;
    writeHash();
  },

  width() {
    const r = $('tl-canvas').getBoundingClientRect();
    return Math.max(50, Math.floor(r.width) - GUTTER);
  },

  // One request at a time; the latest view wins.
  async fetch() {
    if (this.inflight) { this.again = true; return; }
    const c = this.capture();
    if (!c || !c.threads) return;
    this.inflight = true;
    clearTimeout(this.retryTimer);
    const w = { from: Math.max(0, Math.floor(S.from)), until: Math.ceil(S.until), px: this.width() };
    let retry = false;
    try {
      const q = { c: S.c, from: w.from, until: Math.max(w.until, w.from + 1), px: w.px };
      const [buf, lives] = await Promise.all([api('timeline', q, true), c.lives && c.lives.length ? api('lives', q) : null]);
      this.answer = readAnswer(buf);
      this.lives = lives ? new Map(lives.sites.map((l) => [l.site, l])) : null;
      this.retries = 0;
      // A failure said in the status line is over.
      if (this.failed) { this.failed = false; this.showStatus(c); }
      this.draw();
      if (!this.again) { document.body.dataset.painted = '1'; this.ready = true; }
    } catch (e) {
      $('status').textContent = e.status === 202 ? 'timeline: indexing…' : `timeline: ${e.message}`;
      this.failed = true;
      // Not ready yet (202: the index is being built, as when a live capture ends), or a
      // request that failed on its way or in the server: asked again shortly. Without this
      // the view stayed on an older window until the user moved it (a live capture's last
      // window is asked for once, as it ends). A request the server refused (4xx) is not.
      retry = e.status === undefined || e.status === 202 || e.status >= 500;
    }
    this.inflight = false;
    if (this.again) {
      this.again = false;
      this.fetch();
    } else if (retry && (this.retries || 0) < 40) {
      // Every 300 ms, as the summary is asked again (loadSummary), for 12 s at most.
      this.retries = (this.retries || 0) + 1;
      this.retryTimer = setTimeout(() => this.fetch(), 300);
    }
  },

  setView(from, until) {
    const c = this.capture();
    const full = Math.max(c.duration_ns * 1.05, 1000);
    let span = Math.min(Math.max(until - from, 50), full * 1.2);
    from = Math.max(-span * 0.1, Math.min(from, full - span * 0.5));
    S.from = from; S.until = from + span;
    writeHash();
    this.draw();
    this.fetch();
  },

  zoom(factor, atX) {
    const w = this.width();
    const f = (atX === undefined ? w / 2 : atX - GUTTER) / w;
    const span = S.until - S.from;
    const ns = S.from + f * span;
    const nspan = span * factor;
    this.setView(ns - f * nspan, ns - f * nspan + nspan);
  },

  pan(dxPx) {
    const d = dxPx * (S.until - S.from) / this.width();
    this.setView(S.from + d, S.until + d);
  },

  x(ns) { return GUTTER + (ns - S.from) / (S.until - S.from) * this.width(); },
  ns(x) { return S.from + (x - GUTTER) / this.width() * (S.until - S.from); },

  // Tracks: counters first, then each thread (header, depth rows, samples).
  computeLayout() {
    const c = this.capture();
    const out = [];
    let y = RULER;
    for (const id of c.counters || []) { out.push({ kind: 'counter', id, y, h: COUNTER }); y += COUNTER; }
    for (const site of c.lives || []) {
      const l = this.lives && this.lives.get(site);
      const lanes = Math.max(1, this.lanes[site] || 0, l ? l.lanes.length : 0);
      this.lanes[site] = lanes;
      const h = HEAD + lanes * LANE + NARROW + 4;
      out.push({ kind: 'lives', site, y, h, lanes });
      y += h;
    }
    for (const t of [...c.threads].sort((a, b) => a.index - b.index)) {
      const depth = Math.max(t.depth, this.answerRows(t.index));
      const h = HEAD + depth * ROW + (t.sampled ? SAMPLES : 0) + 4;
      out.push({ kind: 'thread', t, y, h, depth });
      y += h;
    }
    this.layout = out;
    this.totalH = y;
  },

  answerRows(index) {
    const a = this.answer && this.answer.byIndex.get(index);
    return a ? a.rows.length : 0;
  },

  draw() {
    const canvas = $('tl-canvas');
    const { ctx, w, h } = setupCanvas(canvas);
    ctx.clearRect(0, 0, w, h);
    const c = this.capture();
    if (!c) return;
    if (!c.threads) {
      ctx.fillStyle = '#6b6f76';
      ctx.fillText(c && c.status.error ? c.status.error : 'indexing…', 20, 40);
      return;
    }
    this.computeLayout();
    S.scrollY = Math.max(0, Math.min(S.scrollY, this.totalH - h + 20));
    const a = this.answer;
    const tw = this.width();
    const scopeName = (id) => { const s = c.scopes[id]; return s ? s[0] : `<scope #${id}>`; };
    // Tracks.
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, RULER, w, h - RULER);
    ctx.clip();
    for (const tr of this.layout) {
      const y = tr.y - S.scrollY;
      if (y > h || y + tr.h < RULER) continue;
      if (tr.kind === 'counter') { this.drawCounter(ctx, tr, y, w, a); continue; }
      if (tr.kind === 'lives') { this.drawLives(ctx, tr, y, w, scopeName(tr.site)); continue; }
      const t = tr.t;
      ctx.fillStyle = '#f1f1f2';
      ctx.fillRect(0, y, w, HEAD);
      ctx.fillStyle = '#1d1f21';
      ctx.font = '600 11px system-ui, sans-serif';
      ctx.fillText(fit(ctx, `${t.name}`, GUTTER - 60), 6, y + HEAD / 2);
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillStyle = '#6b6f76';
      ctx.fillText(t.tid !== null ? `tid ${t.tid}` : '', GUTTER - 58, y + HEAD / 2);
      const ta = a && a.byIndex.get(t.index);
      if (!ta) continue;
      // Busy pixels, then slices.
      const aw = a.until - a.from, npp = aw / a.px;
      ta.rows.forEach((row, d) => {
        const ry = y + HEAD + d * ROW;
        if (ry > h || ry + ROW < RULER) return;
        ctx.fillStyle = '#8a8f98';
        for (let i = 0; i < row.busyPx.length; i++) {
          const x0 = this.x(a.from + row.busyPx[i] * npp), x1 = this.x(a.from + (row.busyPx[i] + 1) * npp);
          if (x1 < GUTTER || x0 > w) continue;
          ctx.globalAlpha = 0.15 + 0.7 * row.busyV[i] / 255;
          ctx.fillRect(Math.max(x0, GUTTER), ry + 1, Math.max(1, x1 - x0), ROW - 2);
        }
        ctx.globalAlpha = 1;
        for (const s of row.slices) {
          let x0 = this.x(s.b), x1 = this.x(s.e);
          if (x1 < GUTTER || x0 > w) continue;
          x0 = Math.max(x0, GUTTER); x1 = Math.min(x1, w);
          const name = scopeName(s.id);
          const hl = S.highlight !== null && s.id === S.highlight;
          ctx.fillStyle = scopeColour(s.id, s.close === 0 ? 72 : 84);
          ctx.fillRect(x0, ry + 1, Math.max(1, x1 - x0 - (x1 - x0 > 3 ? 0.5 : 0)), ROW - 2);
          if (hl) { ctx.strokeStyle = '#1d1f21'; ctx.lineWidth = 1.5; ctx.strokeRect(x0 + 0.5, ry + 1.5, Math.max(1, x1 - x0 - 1), ROW - 3); }
          if (s.close !== 0) { ctx.fillStyle = '#b3261e'; ctx.fillRect(x1 - 2, ry + 1, 2, ROW - 2); }
          if (x1 - x0 > 26) {
            ctx.fillStyle = '#1d1f21';
            ctx.fillText(fit(ctx, name, x1 - x0 - 6), x0 + 3, ry + ROW / 2);
          }
        }
      });
      // Samples strip.
      if (t.sampled) {
        const sy = y + HEAD + tr.depth * ROW + 1;
        let max = 1;
        for (const n of ta.samplesN) max = Math.max(max, n);
        ctx.fillStyle = '#2e7d32';
        for (let i = 0; i < ta.samplesPx.length; i++) {
          const x0 = this.x(a.from + ta.samplesPx[i] * npp), x1 = this.x(a.from + (ta.samplesPx[i] + 1) * npp);
          ctx.globalAlpha = 0.25 + 0.75 * ta.samplesN[i] / max;
          ctx.fillRect(Math.max(x0, GUTTER), sy, Math.max(1, x1 - x0), SAMPLES - 3);
        }
        ctx.globalAlpha = 1;
      }
      // Frame marks (ticks under the header), messages and losses.
      ctx.fillStyle = '#7c86c9';
      for (let i = 0; i < ta.framesPx.length; i++) {
        const x = this.x(a.from + (ta.framesPx[i] + 0.5) * npp);
        if (x >= GUTTER && x <= w) ctx.fillRect(x, y + HEAD - 5, 1, 4);
      }
      ctx.fillStyle = '#c77700';
      for (let i = 0; i < ta.messagesPx.length; i++) {
        const x = this.x(a.from + (ta.messagesPx[i] + 0.5) * npp);
        if (x < GUTTER || x > w) continue;
        ctx.beginPath(); ctx.moveTo(x - 4, y + 3); ctx.lineTo(x + 4, y + 3); ctx.lineTo(x, y + HEAD - 4); ctx.fill();
      }
      for (const l of ta.losses) {
        const x = this.x(l.ns);
        if (x < GUTTER || x > w) continue;
        ctx.fillStyle = '#d32f2f';
        ctx.fillRect(x - 1, y, 3, tr.h - 4);
      }
    }
    ctx.restore();
    // Gutter line, ruler, selection.
    ctx.fillStyle = '#d9dadc';
    ctx.fillRect(GUTTER - 1, RULER, 1, h - RULER);
    this.drawRuler(ctx, w, tw);
    if (S.sel) {
      const x0 = this.x(S.sel[0]), x1 = this.x(S.sel[1]);
      ctx.fillStyle = 'rgba(42, 98, 201, 0.14)';
      ctx.fillRect(Math.max(x0, GUTTER), RULER, Math.max(1, Math.min(x1, w) - Math.max(x0, GUTTER)), h - RULER);
      ctx.fillStyle = '#2a62c9';
      ctx.fillRect(x0, 0, 1, h); ctx.fillRect(x1, 0, 1, h);
    }
    if (this.drag && this.drag.mode === 'select') {
      const x0 = Math.min(this.drag.x0, this.drag.x), x1 = Math.max(this.drag.x0, this.drag.x);
      ctx.fillStyle = 'rgba(42, 98, 201, 0.2)';
      ctx.fillRect(x0, 0, x1 - x0, h);
    }
    $('tl-window').textContent = `${fmtAt(Math.max(0, S.from), (S.until - S.from) / 10)} – ${fmtAt(S.until, (S.until - S.from) / 10)} (${dur(S.until - S.from)})${a && a.decoded ? '' : a ? ' · scopes narrower than a pixel are shown grey' : ''}`;
    $('tl-zoomsel').disabled = !S.sel;
  },

  drawRuler(ctx, w, tw) {
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, w, RULER);
    ctx.fillStyle = '#d9dadc';
    ctx.fillRect(0, RULER - 1, w, 1);
    const span = S.until - S.from;
    const raw = span / (tw / 110);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || 10 * p;
    ctx.fillStyle = '#1d1f21';
    for (let t = Math.ceil(S.from / step) * step; t <= S.until; t += step) {
      const x = this.x(t);
      if (x < GUTTER) continue;
      ctx.fillRect(x, RULER - 7, 1, 6);
      ctx.fillText(fmtAt(t, step), x + 3, RULER / 2 - 1);
    }
    ctx.fillStyle = '#6b6f76';
    ctx.fillText('time since capture start', 6, RULER / 2);
  },

  // A call site's futures or spans, each life a bar from its first poll (creation) to its end
  // (close), concurrent ones in lanes; those narrower than a pixel as ticks under the lanes.
  drawLives(ctx, tr, y, w, name) {
    ctx.fillStyle = '#eef3fb';
    ctx.fillRect(0, y, w, HEAD);
    ctx.fillStyle = '#1d1f21';
    ctx.font = '600 11px system-ui, sans-serif';
    ctx.fillText(fit(ctx, name, GUTTER - 12), 6, y + HEAD / 2);
    ctx.font = '11px system-ui, sans-serif';
    const l = this.lives && this.lives.get(tr.site);
    ctx.fillStyle = '#6b6f76';
    ctx.fillText(fit(ctx, `lives${l ? ` · ${count(l.ended)} ended` : ''}`, w - GUTTER - 8), GUTTER + 4, y + HEAD / 2);
    if (!l) return;
    l.lanes.forEach((lane, i) => {
      const ly = y + HEAD + i * LANE;
      for (const [b, e, how] of lane) {
        let x0 = this.x(b), x1 = this.x(e);
        if (x1 < GUTTER || x0 > w) continue;
        x0 = Math.max(x0, GUTTER); x1 = Math.min(x1, w);
        const bw = Math.max(1, x1 - x0 - (x1 - x0 > 3 ? 0.5 : 0));
        ctx.fillStyle = scopeColour(tr.site, how === 1 ? 88 : 78);
        ctx.fillRect(x0, ly + 1, bw, LANE - 2);
        if (how === 1) { ctx.fillStyle = '#b3261e'; ctx.fillRect(x1 - 2, ly + 1, 2, LANE - 2); }
        if (how === 2) { ctx.fillStyle = '#1d1f21'; for (let k = 0; k < LANE - 2; k += 3) ctx.fillRect(x1 - 1, ly + 1 + k, 1, 2); }
        if (how === 3) { ctx.fillStyle = '#1d1f21'; for (let k = 0; k < LANE - 2; k += 3) ctx.fillRect(x0, ly + 1 + k, 1, 2); }
        if (x1 - x0 > 30) {
          ctx.fillStyle = '#1d1f21';
          ctx.fillText(fit(ctx, `${name} ${dur(e - b)}`, x1 - x0 - 6), x0 + 3, ly + LANE / 2);
        }
      }
    });
    const ny = y + HEAD + tr.lanes * LANE + 1;
    let max = 1;
    for (const [, n] of l.narrow) max = Math.max(max, n);
    const npp = (S.until - S.from) / this.width();
    ctx.fillStyle = scopeColour(tr.site, 50);
    for (const [p, n] of l.narrow) {
      const x = this.x(this.answer ? this.answer.from + p * (this.answer.until - this.answer.from) / this.answer.px : S.from + p * npp);
      if (x < GUTTER || x > w) continue;
      ctx.globalAlpha = 0.3 + 0.7 * n / max;
      ctx.fillRect(x, ny, 1, NARROW - 2);
    }
    ctx.globalAlpha = 1;
  },

  drawCounter(ctx, tr, y, w, a) {
    const c = this.capture();
    const name = c.markers[tr.id] ? c.markers[tr.id][0] : `counter #${tr.id}`;
    ctx.fillStyle = '#f7f7f8';
    ctx.fillRect(0, y, w, tr.h - 2);
    ctx.fillStyle = '#1d1f21';
    ctx.fillText(fit(ctx, name, GUTTER - 12), 6, y + 10);
    const co = a && a.counters.get(String(tr.id));
    if (!co || co.px.length === 0) return;
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < co.px.length; i++) { lo = Math.min(lo, co.min[i]); hi = Math.max(hi, co.max[i]); }
    ctx.fillStyle = '#6b6f76';
    ctx.fillText(`${+hi.toPrecision(4)}`, GUTTER - 56, y + 8);
    ctx.fillText(`${+lo.toPrecision(4)}`, GUTTER - 56, y + tr.h - 10);
    const range = hi - lo;
    const yy = (v) => (range > 0 ? y + tr.h - 4 - (v - lo) / range * (tr.h - 8) : y + tr.h / 2);
    const npp = (a.until - a.from) / a.px;
    ctx.fillStyle = '#00897b';
    for (let i = 0; i < co.px.length; i++) {
      const x0 = this.x(a.from + co.px[i] * npp), x1 = this.x(a.from + (co.px[i] + 1) * npp);
      if (x1 < GUTTER || x0 > w) continue;
      const top = yy(co.max[i]), bot = yy(co.min[i]);
      ctx.fillRect(Math.max(x0, GUTTER), top, Math.max(1, x1 - x0), Math.max(1.5, bot - top));
    }
  },

  // What is under (x, y): {track, row, slice, ns}.
  hit(x, y) {
    const yy = y + S.scrollY;
    const tr = this.layout.find((t) => yy >= t.y && yy < t.y + t.h);
    if (!tr || x < GUTTER) return { tr };
    const ns = this.ns(x);
    if (tr.kind === 'lives') {
      const lane = Math.floor((yy - tr.y - HEAD) / LANE);
      const l = this.lives && this.lives.get(tr.site);
      const pxNs = (S.until - S.from) / this.width();
      let life = null;
      if (l && lane >= 0 && lane < l.lanes.length) {
        for (const v of l.lanes[lane]) if (v[0] - pxNs <= ns && v[1] + pxNs >= ns) { life = v; if (v[0] <= ns && v[1] >= ns) break; }
      }
      return { tr, ns, life };
    }
    if (tr.kind !== 'thread') return { tr, ns };
    const rel = yy - tr.y - HEAD;
    if (rel < 0) return { tr, ns, header: true };
    const d = Math.floor(rel / ROW);
    if (d >= tr.depth) return { tr, ns, samples: true };
    const a = this.answer;
    const ta = a && a.byIndex.get(tr.t.index);
    const row = ta && ta.rows[d];
    let slice = null;
    if (row) {
      const pxNs = (S.until - S.from) / this.width();
      for (const s of row.slices) if (s.b - pxNs <= ns && s.e + pxNs >= ns) { slice = s; if (s.b <= ns && s.e >= ns) break; }
    }
    let busy = 0;
    if (row && !slice) {
      const p = Math.floor((ns - a.from) / ((a.until - a.from) / a.px));
      const i = row.busyPx.indexOf(p);
      if (i >= 0) busy = row.busyV[i];
    }
    return { tr, ns, depth: d, slice, busy };
  },

  tip(e) {
    const tip = $('tip');
    const r = $('tl-canvas').getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const h = this.hit(x, y);
    const c = this.capture();
    let text = null;
    if (h.life) {
      const s = c.scopes[h.tr.site];
      text = `${s ? s[0] : `<scope #${h.tr.site}>`}: a life of ${dur(h.life[1] - h.life[0])}${s ? ` · ${s[1]}:${s[2]}` : ''}\n${HOW[h.life[2]]}`;
    } else if (h.slice) {
      const s = c.scopes[h.slice.id];
      text = `${s ? s[0] : `<scope #${h.slice.id}>`}\n${dur(h.slice.e - h.slice.b)}${s ? ` · ${s[1]}:${s[2]}` : ''}${['', ' · abandoned', ' · cut', ' · still open'][h.slice.close]}`;
    } else if (h.busy) {
      text = `${Math.round(100 * h.busy / 255)}% busy with scopes narrower than a pixel: zoom in, or click for the scope here`;
    } else if (h.header && this.answer) {
      const ta = this.answer.byIndex.get(h.tr.t.index);
      if (ta && ta.texts.length) {
        let best = null;
        for (const m of ta.texts) if (!best || Math.abs(m.ns - h.ns) < Math.abs(best.ns - h.ns)) best = m;
        if (best && Math.abs(this.x(best.ns) - x) < 8) text = `message at ${fmtAt(best.ns, 1)}:\n${best.text}`;
      }
      for (const l of (ta ? ta.losses : [])) if (Math.abs(this.x(l.ns) - x) < 4) text = `${count(l.n)} events dropped here (memory budget spent)`;
    }
    if (!text) { tip.hidden = true; return; }
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = `${Math.min(x + 14, r.width - 320)}px`;
    tip.style.top = `${y + 16}px`;
  },

  async details(h) {
    const box = $('details');
    const c = this.capture();
    let d;
    try {
      d = await api('scope', { c: S.c, thread: h.tr.t.index, depth: h.depth, at: Math.max(0, Math.round(h.ns)) });
    } catch (e) { box.replaceChildren(el('h2', { text: 'Scope' }), el('p', { class: 'note', text: e.message })); return; }
    if (!d) { box.replaceChildren(el('h2', { text: 'Scope' }), el('p', { class: 'note', text: 'No scope there.' })); return; }
    S.highlight = d.scope.id;
    this.draw();
    const kv = el('dl', { class: 'kv' },
      el('dt', { text: 'scope' }), el('dd', { class: 'mono', text: d.scope.name }),
      el('dt', { text: 'location' }), el('dd', { class: 'mono', text: d.scope.file ? `${d.scope.file}:${d.scope.line}` : '-' }),
      el('dt', { text: 'thread' }), el('dd', { text: `${d.thread_name} (depth ${d.depth})` }),
      el('dt', { text: 'begins' }), el('dd', { class: 'mono', text: fmtAt(d.begin_ns, 1) }),
      el('dt', { text: 'duration' }), el('dd', { class: 'mono', text: dur(d.duration_ns), 'data-value': d.duration_ns }),
      el('dt', { text: 'self' }), el('dd', { class: 'mono', text: `${dur(d.self_ns)}${d.exact ? '' : ' (to a bin)'}`, 'data-value': d.self_ns }),
      el('dt', { text: 'ended' }), el('dd', { text: d.ended }));
    const kids = d.children.length ? table([
      { key: 'name', label: 'child', value: (r) => r.name },
      { key: 'calls', label: 'calls', num: true, value: (r) => r.calls, text: (r) => count(r.calls) },
      { key: 'total', label: 'total', num: true, value: (r) => r.total_ns, text: (r) => dur(r.total_ns) },
    ], d.children) : el('p', { class: 'note', text: d.exact ? 'No child scopes.' : '' });
    box.replaceChildren(el('h2', { text: 'Scope' }), kv, kids,
      el('button', { text: 'Zoom to it', onclick: () => this.setView(d.begin_ns - (d.end_ns - d.begin_ns) * 0.05, d.end_ns + (d.end_ns - d.begin_ns) * 0.05) }));
  },

  lifeDetails(site, life) {
    const c = this.capture();
    const s = c.scopes[site] || [`<scope #${site}>`, '', 0];
    const [b, e, how] = life;
    S.highlight = site;
    const kv = el('dl', { class: 'kv' },
      el('dt', { text: 'call site' }), el('dd', { class: 'mono', text: s[0] }),
      el('dt', { text: 'location' }), el('dd', { class: 'mono', text: s[1] ? `${s[1]}:${s[2]}` : '-' }),
      el('dt', { text: 'begins' }), el('dd', { class: 'mono', text: fmtAt(b, 1) }),
      el('dt', { text: 'wall time' }), el('dd', { class: 'mono', text: dur(e - b), 'data-value': e - b }),
      el('dt', { text: 'ended' }), el('dd', { text: HOW[how] }));
    $('details').replaceChildren(el('h2', { text: 'Life of a future or span' }), kv,
      el('p', { class: 'note', text: 'From its first poll to ready or drop (a future), or its creation to its close (a span). Its polls or entries are the slices of the same name on the threads that ran them.' }),
      el('button', { text: 'Zoom to it', onclick: () => this.setView(b - (e - b) * 0.05, e + (e - b) * 0.05) }));
    this.draw();
  },

  async loadSummary() {
    const key = `${S.c}:${S.sel ? S.sel.join(',') : ''}`;
    if (this.summaryFor === key) return;
    this.summaryFor = key;
    const box = $('summary');
    try {
      const s = await api('summary', S.sel ? { c: S.c, from: Math.round(S.sel[0]), until: Math.round(S.sel[1]) } : { c: S.c });
      if (this.summaryFor !== key) return;
      this.summaryAt = Date.now();
      if (!S.sel) this.summary = s;
      renderSummary(box, s, this.capture());
      banner();
      this.profileTop(box);
    } catch (e) {
      if (e.status === 202) { this.summaryFor = null; box.replaceChildren(el('p', { class: 'note', text: 'Computing the summary…' })); setTimeout(() => { if (S.tab === 'timeline') this.loadSummary(); }, 300); return; }
      box.replaceChildren(el('p', { class: 'note', text: `summary: ${e.message}` }));
    }
    this.loadSamples();
  },

  // With a profile beside the capture, its top functions under the summary: the first page
  // holds both tables as text.
  async profileTop(box) {
    const i = S.info.profiles.findIndex((p, k) => !S.info.diff || (k !== S.info.diff.base && k !== S.info.diff.new));
    if (i < 0) return;
    try {
      const t = await api('top', { p: i });
      box.append(el('h2', { text: `Top functions of ${short(S.info.profiles[i].name)} (as tickscope top prints them)` }),
        topTable(t.rows.slice(0, 25), t, (r) => { show('profile', i); PF.pick(r.name); }));
      box.lastChild.id = 'first-top-table';
    } catch (e) {
      box.append(el('p', { class: 'note', text: `top: ${e.message}` }));
    }
  },

  async loadSamples() {
    const c = this.capture();
    const sampled = c.threads && c.threads.some((t) => t.sampled);
    $('smp-tab').hidden = !sampled;
    if (!sampled) return;
    const box = $('samples');
    try {
      const r = S.sel || [0, c.duration_ns + 1];
      const f = await api('samples', { c: S.c, from: Math.round(r[0]), until: Math.round(r[1]) });
      box.querySelector('.note').textContent = `${count(f.cum[0])} CPU samples ${S.sel ? `in ${fmtAt(r[0], 1)} – ${fmtAt(r[1], 1)}` : 'in the whole capture (select a range for its own)'}`;
      if (!this.smpFlame) this.smpFlame = new Flame($('smp-canvas'), { icicle: () => false, tip: flameBox($('smp-canvas')) });
      this.smpFlame.set(f);
      const rows = f.top.rows;
      $('smp-top').replaceChildren(topTable(rows, f.top));
    } catch (e) {
      box.querySelector('.note').textContent = `samples: ${e.message}`;
    }
  },
};

function renderSummary(box, s, c) {
  const head = s.range
    ? `Range ${fmtAt(s.range.from_ns, 1)} – ${fmtAt(s.range.until_ns, 1)}: the calls that began and ended in it (${count(s.range.crossing)} crossing its edges not counted), as tickscope report --from --until.`
    : `The whole capture: ${dur(s.wall_ns)} of wall time, ${count(s.events)} events, as tickscope report prints it.`;
  const cols = [
    { key: 'name', label: 'name', value: (r) => r.name, html: (r) => el('span', {}, el('span', { class: 'swatch', style: `background:${scopeColour(r.id, 72)}` }), r.name + (r.kind === 'group' ? ' [group]' : '')) },
    { key: 'location', label: 'location', value: (r) => `${r.file}:${r.line}`, text: (r) => `${short(r.file)}:${r.line}` },
    { key: 'calls', label: 'calls', num: true, value: (r) => r.calls, text: (r) => count(r.calls) },
    { key: 'total_ns', label: 'total', num: true, value: (r) => r.total_ns, text: (r) => dur(r.total_ns) },
    { key: 'self_ns', label: 'self', num: true, value: (r) => r.self_ns, text: (r) => dur(r.self_ns) },
    { key: 'mean_ns', label: 'mean', num: true, value: (r) => r.mean_ns ?? -1, text: (r) => dur(r.mean_ns ?? NaN) },
    { key: 'min_ns', label: 'min', num: true, value: (r) => r.min_ns ?? -1, text: (r) => dur(r.min_ns ?? NaN) },
    { key: 'p50_ns', label: 'p50', num: true, value: (r) => r.p50_ns ?? -1, text: (r) => dur(r.p50_ns ?? NaN) },
    { key: 'p99_ns', label: 'p99', num: true, value: (r) => r.p99_ns ?? -1, text: (r) => dur(r.p99_ns ?? NaN) },
    { key: 'max_ns', label: 'max', num: true, value: (r) => r.max_ns ?? -1, text: (r) => dur(r.max_ns ?? NaN) },
    { key: 'wall_percent', label: '%wall', num: true, value: (r) => r.wall_percent, text: (r) => r.wall_percent.toFixed(1) },
    { key: 'dropped', label: 'dropped', num: true, value: (r) => r.dropped, text: (r) => count(r.dropped), help: 'calls dropped whole past the memory budget' },
  ];
  const t = table(cols, s.scopes, { sortable: true, onPick: (r) => { S.highlight = r.id; TL.draw(); }, class: 'summary' });
  t.id = 'summary-table';
  // Futures and spans: busy (their polls or entries, the rows above) beside wall (their lives).
  const timed = s.scopes.filter((r) => r.wall);
  const lives = [];
  if (timed.length) {
    const w = (k) => (r) => r.wall[k];
    const wcols = [
      cols[0],
      { key: 'lives', label: 'lives', num: true, value: w('calls'), text: (r) => count(r.wall.calls) },
      { key: 'cancelled', label: 'cancelled', num: true, value: w('cancelled'), text: (r) => count(r.wall.cancelled) },
      { key: 'calls', label: 'entries', num: true, value: (r) => r.calls, text: (r) => count(r.calls) },
      { key: 'total_ns', label: 'busy', num: true, value: (r) => r.total_ns, text: (r) => dur(r.total_ns) },
      { key: 'wall_ns', label: 'wall', num: true, value: w('total_ns'), text: (r) => dur(r.wall.total_ns) },
      { key: 'wall_p50', label: 'wall p50', num: true, value: w('p50_ns'), text: (r) => dur(r.wall.p50_ns) },
      { key: 'wall_p99', label: 'wall p99', num: true, value: w('p99_ns'), text: (r) => dur(r.wall.p99_ns) },
      { key: 'wall_max', label: 'wall max', num: true, value: w('max_ns'), text: (r) => dur(r.wall.max_ns) },
    ];
    const lt = table(wcols, timed, { sortable: true, onPick: (r) => { S.highlight = r.id; TL.draw(); }, class: 'summary' });
    lt.id = 'lives-table';
    lives.push(el('p', { class: 'note', text: 'Futures and spans: busy = time polled or entered, wall = first poll → ready or dropped (future), created → closed (span).' }), lt);
  }
  const l = s.lost;
  const extra = [];
  if (s.frames.length) extra.push(`frames: ${s.frames.map((f) => `${f.name} ${count(f.frames)} (mean ${dur(f.mean_ns ?? NaN)}, p99 ${dur(f.p99_ns ?? NaN)}, max ${dur(f.max_ns ?? NaN)})`).join('; ')}`);
  if (s.counters.length) extra.push(`counters: ${s.counters.map((x) => `${x.name} ${count(x.count)} values, ${x.min} to ${x.max}`).join('; ')}`);
  if (s.messages.count) extra.push(`messages: ${count(s.messages.count)}${s.messages.first.length ? ` — first: ${s.messages.first.map((m) => m.text).join(' | ')}` : ''}`);
  extra.push(`lost: ${count(l.dropped)} events dropped (memory budget spent) · ${count(l.undelivered)} undelivered · ${count(l.evicted)} evicted (flight-recorder window) · scopes: ${count(l.abandoned)} abandoned, ${count(l.unmatched_ends)} ends unmatched, ${count(l.open_at_end)} open at the end, ${count(l.dropped_scopes)} dropped whole, ${count(l.in_flight_at_start)} in flight at the start`);
  if (l.async_unpaired) extra.push(`futures and spans: ${count(l.async_unpaired)} with one end of their life in the capture (no wall time)`);
  box.replaceChildren(el('p', { class: 'note', text: head }), t, ...lives, ...extra.map((x) => el('p', { class: 'note', text: x })));
}

// A window's answer (crates/view/src/wire.rs).
function readAnswer(buf) {
  const v = new DataView(buf);
  let o = 0;
  const f64 = () => { const x = v.getFloat64(o, true); o += 8; return x; };
  const f32 = () => { const x = v.getFloat32(o, true); o += 4; return x; };
  const u32 = () => { const x = v.getUint32(o, true); o += 4; return x; };
  const u16 = () => { const x = v.getUint16(o, true); o += 2; return x; };
  const u8 = () => v.getUint8(o++);
  const dec = new TextDecoder();
  const a = { from: f64(), until: f64(), px: u32(), decoded: u8() === 1, binNs: f64(), byIndex: new Map(), counters: new Map() };
  const nt = u32();
  for (let t = 0; t < nt; t++) {
    const index = f64();
    const rows = [];
    const nr = u32();
    for (let r = 0; r < nr; r++) {
      const ns = u32();
      const slices = new Array(ns);
      for (let i = 0; i < ns; i++) slices[i] = { b: f64(), e: f64(), id: f64(), close: u8() };
      const nb = u32();
      const busyPx = new Uint16Array(nb), busyV = new Uint8Array(nb);
      for (let i = 0; i < nb; i++) { busyPx[i] = u16(); busyV[i] = u8(); }
      rows.push({ slices, busyPx, busyV });
    }
    const sparse = () => {
      const n = u32();
      const px = new Uint16Array(n), cnt = new Uint32Array(n);
      for (let i = 0; i < n; i++) { px[i] = u16(); cnt[i] = u32(); }
      return [px, cnt];
    };
    const [framesPx, framesN] = sparse();
    const [messagesPx, messagesN] = sparse();
    const [samplesPx, samplesN] = sparse();
    const texts = [];
    const nm = u32();
    for (let i = 0; i < nm; i++) { const ns = f64(); const len = u32(); texts.push({ ns, text: dec.decode(new Uint8Array(buf, o, len)) }); o += len; }
    const losses = [];
    const nl = u32();
    for (let i = 0; i < nl; i++) losses.push({ ns: f64(), n: f64() });
    a.byIndex.set(index, { rows, framesPx, framesN, messagesPx, messagesN, samplesPx, samplesN, texts, losses });
  }
  const nc = u32();
  for (let c = 0; c < nc; c++) {
    const id = f64();
    const n = u32();
    const px = new Uint16Array(n), min = new Float32Array(n), max = new Float32Array(n);
    for (let i = 0; i < n; i++) { px[i] = u16(); min[i] = f32(); max[i] = f32(); }
    a.counters.set(String(id), { px, min, max });
  }
  return a;
}

function setupTimeline() {
  const canvas = $('tl-canvas');
  canvas.addEventListener('wheel', (e) => {
    e.preventDefault();
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY) * 2) {
      if (e.shiftKey) { S.scrollY += e.deltaY; TL.draw(); } else TL.pan(e.deltaX);
      return;
    }
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left;
    TL.zoom(Math.exp(e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.002)), Math.max(x, GUTTER));
  }, { passive: false });
  canvas.addEventListener('mousedown', (e) => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    canvas.focus();
    TL.drag = { x0: x, x, y0: y, moved: false, from: S.from, until: S.until, mode: (e.shiftKey || y < RULER) && x >= GUTTER ? 'select' : 'pan' };
  });
  window.addEventListener('mousemove', (e) => {
    const d = TL.drag;
    const r = canvas.getBoundingClientRect();
    if (!d) { if (e.target === canvas) TL.tip(e); return; }
    const x = e.clientX - r.left;
    d.x = x;
    if (Math.abs(x - d.x0) > 3) d.moved = true;
    if (!d.moved) return;
    if (d.mode === 'pan') {
      const ns = (d.x0 - x) * (d.until - d.from) / TL.width();
      TL.setView(d.from + ns, d.until + ns);
    } else TL.draw();
  });
  window.addEventListener('mouseup', (e) => {
    const d = TL.drag;
    if (!d) return;
    TL.drag = null;
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    if (d.mode === 'select' && d.moved) {
      const a = TL.ns(Math.max(Math.min(d.x0, x), GUTTER)), b = TL.ns(Math.max(d.x0, x));
      select([Math.max(0, a), b]);
      return;
    }
    if (!d.moved) {
      const h = TL.hit(x, y);
      if (h.tr && h.tr.kind === 'thread' && h.depth !== undefined && !h.samples) TL.details(h.slice ? { ...h, ns: (h.slice.b + h.slice.e) / 2 } : h);
      if (h.life) TL.lifeDetails(h.tr.site, h.life);
    }
    TL.draw();
  });
  canvas.addEventListener('mouseleave', () => { $('tip').hidden = true; });
  canvas.addEventListener('keydown', (e) => {
    const k = e.key.toLowerCase();
    if (k === 'w') TL.zoom(0.8);
    else if (k === 's') TL.zoom(1.25);
    else if (k === 'a') TL.pan(-TL.width() * 0.1);
    else if (k === 'd') TL.pan(TL.width() * 0.1);
    else if (k === 'arrowdown') { S.scrollY += 40; TL.draw(); }
    else if (k === 'arrowup') { S.scrollY -= 40; TL.draw(); }
    else if (k === 'home') { TL.whole(); TL.draw(); TL.fetch(); }
    else if (k === 'z' && S.sel) TL.setView(S.sel[0], S.sel[1]);
    else if (k === 'escape') select(null);
    else return;
    e.preventDefault();
  });
  $('tl-all').addEventListener('click', () => { TL.whole(); TL.draw(); TL.fetch(); });
  $('tl-zoomsel').addEventListener('click', () => { if (S.sel) TL.setView(S.sel[0], S.sel[1]); });
  $('tl-follow').addEventListener('change', (e) => { S.follow = e.target.checked; });
  $('sum-tab').addEventListener('click', () => subtab('summary'));
  $('smp-tab').addEventListener('click', () => subtab('samples'));
  new ResizeObserver(() => { if (S.tab === 'timeline') { TL.draw(); TL.fetch(); } }).observe($('tl-wrap'));
}

function subtab(which) {
  $('summary').hidden = which !== 'summary';
  $('samples').hidden = which !== 'samples';
  $('sum-tab').classList.toggle('on', which === 'summary');
  $('smp-tab').classList.toggle('on', which === 'samples');
  if (which === 'samples' && TL.smpFlame) TL.smpFlame.draw();
}

function select(range) {
  S.sel = range && range[1] - range[0] > 0 ? range : null;
  writeHash();
  TL.draw();
  TL.loadSummary();
}

// ---- Profiles -----------------------------------------------------------------------------

function topTable(rows, top, onPick) {
  return table([
    { key: 'flat', label: 'flat', num: true, value: (r) => r.flat, text: (r) => r.flat_text },
    { key: 'flat_pct', label: 'flat%', num: true, value: (r) => r.flat_pct, text: (r) => `${r.flat_pct.toFixed(2)}%` },
    { key: 'sum_pct', label: 'sum%', num: true, value: (r) => r.sum_pct, text: (r) => `${r.sum_pct.toFixed(2)}%` },
    { key: 'cum', label: 'cum', num: true, value: (r) => r.cum, text: (r) => r.cum_text },
    { key: 'cum_pct', label: 'cum%', num: true, value: (r) => r.cum_pct, text: (r) => `${r.cum_pct.toFixed(2)}%` },
    { key: 'name', label: 'name', value: (r) => r.name, text: (r) => r.name + (r.inline ? ' (inline)' : '') },
  ], rows, { sortable: true, onPick, class: 'top' });
}

const PF = {
  loaded: null,
  flame: null,

  async open() {
    const p = S.info.profiles[S.p];
    if (!p) return;
    $('pf-name').textContent = `${p.name} · ${p.sample_types.join(', ')}`;
    $('status').textContent = `${count(p.samples)} samples`;
    for (const b of document.querySelectorAll('#profile .seg button')) b.classList.toggle('on', b.dataset.pv === S.pv);
    const flame = S.pv === 'flame' || S.pv === 'icicle';
    $('pf-flamebox').hidden = !flame;
    $('pf-top').hidden = S.pv !== 'top';
    $('pf-sandwich').hidden = S.pv !== 'sandwich';
    $('pf-source').hidden = S.pv !== 'source';
    try {
      if (flame) {
        if (this.loaded !== S.p) {
          if (!this.flame) this.flame = new Flame($('pf-canvas'), { icicle: () => S.pv === 'icicle', tip: flameBox($('pf-canvas')), onPick: (n) => this.pick(n) });
          const t0 = performance.now();
          this.flame.set(await api('flame', { p: S.p }));
          this.loaded = S.p;
          document.body.dataset.flameMs = String(Math.round(performance.now() - t0));
        } else this.flame.draw();
        document.body.dataset.flamePainted = '1';
      } else if (S.pv === 'top') {
        const t = await api('top', { p: S.p });
        $('pf-top').replaceChildren(el('p', { class: 'note', text: 'As tickscope top prints it; click a row for its callers and callees.' }), labels(t.labels), topTable(t.rows, t, (r) => this.pick(r.name)));
      } else if (S.pv === 'sandwich') await this.sandwich();
      else if (S.pv === 'source') await this.source();
    } catch (e) {
      $('status').textContent = `${S.pv}: ${e.message}`;
      const pane = S.pv === 'source' ? $('pf-source') : S.pv === 'sandwich' ? $('pf-sandwich') : null;
      if (pane) pane.replaceChildren(el('p', { class: 'note', text: `${S.fn}: ${e.message}` }));
    }
    writeHash();
  },

  pick(name) {
    S.fn = name;
    S.pv = 'sandwich';
    this.open();
  },

  async sandwich() {
    const box = $('pf-sandwich');
    if (!S.fn) { box.replaceChildren(el('p', { class: 'note', text: 'Pick a function: click a row of the top table, or double-click a frame of the flame graph.' })); return; }
    const r = await api('peek', { p: S.p, name: S.fn });
    const n = r.nodes[0];
    if (!n) { box.replaceChildren(el('p', { class: 'note', text: `${S.fn}: not in the profile` })); return; }
    const total = r.total || 1;
    const side = (label, list) => {
      const max = Math.max(1, ...list.map((x) => Math.abs(x.weight)));
      return el('div', {}, el('h3', { text: label }), list.length ? table([
        { key: 'weight', label: 'value', num: true, value: (x) => x.weight, text: (x) => fmtUnit(x.weight, r.unit) },
        { key: 'pct', label: '%', num: true, value: (x) => 100 * x.weight / total, text: (x) => `${(100 * x.weight / total).toFixed(2)}%` },
        { key: 'name', label: 'function', value: (x) => x.name, html: (x) => el('span', {}, el('span', { class: 'bar', style: `width:${Math.round(120 * Math.abs(x.weight) / max)}px` }), x.name) },
      ], list, { onPick: (x) => this.pick(x.name) }) : el('p', { class: 'note', text: 'none' }));
    };
    box.replaceChildren(
      el('h2', { class: 'mono', text: n.name }),
      el('p', { text: `flat ${fmtUnit(n.flat, r.unit)} (${n.flat_pct.toFixed(2)}%) · cum ${fmtUnit(n.cum, r.unit)} (${n.cum_pct.toFixed(2)}%) — as tickscope peek prints it` }),
      el('button', { text: 'Source', onclick: () => { S.pv = 'source'; this.open(); } }),
      side('Callers', n.callers), side('Callees', n.callees));
  },

  async source() {
    const box = $('pf-source');
    if (!S.fn) { box.replaceChildren(el('p', { class: 'note', text: 'Pick a function first (top table or flame graph).' })); return; }
    const r = await api('list', { p: S.p, name: S.fn });
    const parts = [];
    for (const f of r.functions) {
      parts.push(el('h3', { class: 'mono', text: `${f.name} — ${f.file || '?'}` }), el('p', { class: 'note', text: `flat ${fmtUnit(f.flat, r.unit)} · cum ${fmtUnit(f.cum, r.unit)}${f.source_found ? '' : ` · source not found${f.error ? `: ${f.error}` : ''} (tickscope view --source-path DIRS)`}` }));
      const max = Math.max(1, ...f.lines.map((l) => l.cum));
      const pre = el('div', { class: 'mono' }, el('div', { class: 'src-line head' },
        el('span', { class: 'num', text: 'flat' }), el('span', { class: 'num', text: 'cum' }),
        el('span', { class: 'num', text: 'line' }), el('span', { text: 'source' })));
      for (const l of f.lines) {
        pre.append(el('div', { class: `src-line${l.cum > 0.2 * max ? ' hot' : ''}` },
          el('span', { class: 'num', text: l.flat ? fmtUnit(l.flat, r.unit) : '.' }),
          el('span', { class: 'num', text: l.cum ? fmtUnit(l.cum, r.unit) : '.' }),
          el('span', { class: 'num', text: String(l.line) }),
          el('span', { class: 'code', text: l.text ?? '' })));
      }
      parts.push(pre);
    }
    box.replaceChildren(...(parts.length ? parts : [el('p', { class: 'note', text: 'no source lines' })]));
  },
};

// The profile's header lines (pprof's labels), folded away.
function labels(lines) {
  const last = lines.length ? lines[lines.length - 1] : '';
  return el('details', { class: 'labels' }, el('summary', { text: last || 'profile' }), ...lines.slice(0, -1).map((l) => el('p', { class: 'note', text: l })));
}

function fmtUnit(v, unit) {
  if (unit === 'nanoseconds') return dur(v);
  if (unit === 'bytes') return `${(v / 1e6).toFixed(2)} MB`;
  return count(v);
}

function setupProfile() {
  for (const b of document.querySelectorAll('#profile .seg button')) b.addEventListener('click', () => { S.pv = b.dataset.pv; PF.open(); });
  $('pf-search').addEventListener('input', (e) => {
    let re = null;
    try { re = e.target.value ? new RegExp(e.target.value) : null; } catch (_) { re = null; }
    if (PF.flame) PF.flame.search(re);
  });
  new ResizeObserver(() => { if (S.tab === 'profile' && PF.flame) PF.flame.draw(); }).observe($('pf-flamebox'));
}

// ---- Diff -----------------------------------------------------------------------------------

const DF = {
  flame: null,
  async open() {
    try {
      const d = await api('diff', {});
      $('df-name').textContent = `${d.base} → ${d.new}`;
      if (!this.flame) this.flame = new Flame($('df-canvas'), { diff: true, icicle: () => false, tip: flameBox($('df-canvas')) });
      this.flame.set(d);
      const t = d.table;
      $('df-table').replaceChildren(el('p', { class: 'note', text: 'As tickscope diff prints it (negative: shrank).' }), labels(t.labels), topTable(t.rows, t));
    } catch (e) {
      $('status').textContent = `diff: ${e.message}`;
    }
  },
};

// ---- Live captures and start-up ------------------------------------------------------------

async function refreshInfo() {
  S.info = await api('info');
}

async function poll() {
  // A capture still arriving, or a viewer waiting for programs to connect (a page opened
  // before its program started must see the capture appear).
  const live = S.info.captures.some((c) => !c.status.done) || S.info.listening;
  if (live) {
    try {
      const before = S.info.captures[S.c];
      const was = before && before.duration_ns;
      await refreshInfo();
      const c = S.info.captures[S.c];
      if (S.tab === 'timeline' && c && c.threads) {
        if (S.follow && was !== undefined && S.until !== null) {
          if (S.from <= 0 && S.until >= was) {
            // The whole capture in view (as when it first appeared): keep it whole.
            S.from = 0;
            S.until = Math.max(c.duration_ns, 1000) * 1.02;
          } else {
            // A window of the user's: the same span, at the end.
            const span = S.until - S.from;
            S.until = c.duration_ns * 1.02;
            S.from = S.until - span;
          }
        }
        // A live capture's summary is recomputed every few seconds, and once at its end.
        if (c.live && (Date.now() - (TL.summaryAt || 0) > 3000 || c.status.done)) TL.summaryFor = null;
        if (!TL.ready || c.live) { TL.open(); }
      }
      if (S.info.captures.length !== $('tabs').children.length) { buildTabs(); markTabs(); }
    } catch (_) { /* the server went away */ }
  }
  setTimeout(poll, live ? 500 : 2000);
}

async function main() {
  setupTimeline();
  setupProfile();
  try {
    await refreshInfo();
  } catch (e) {
    document.body.prepend(el('p', { class: 'note', text: `Cannot reach the viewer: ${e.message}. Open the URL tickscope view printed (it holds the token).` }));
    return;
  }
  readHash();
  buildTabs();
  if (!S.info.captures.length && S.tab === 'timeline') S.tab = S.info.profiles.length ? (S.info.diff && S.info.profiles.length === 2 ? 'diff' : 'profile') : 'timeline';
  if (S.tab === 'profile' && !S.info.profiles[S.p]) S.tab = 'timeline';
  show(S.tab, S.tab === 'timeline' ? S.c : S.tab === 'profile' ? S.p : undefined);
  if (S.sel) TL.loadSummary();
  poll();
}

// For tests and the curious: the state and the components.
window.tickscope = { S, TL, PF, DF };
main();
