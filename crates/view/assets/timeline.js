// The timeline: a window of a capture, asked of the server at the canvas's width in pixels
// (one request at a time, the latest view winning), drawn (tracks.js), and moved with the
// wheel, the keys and the mouse; a click shows a scope's details, a range its summary and
// CPU samples (panes.js).
//
// TL's drawing (tracks.js) and panes (panes.js) are methods of its own, written in those
// modules and spread into TL as this module is first evaluated, so they must be evaluated
// before it. tracks.js imports nothing that imports this module; panes.js does (through
// tabs.js), so this module must stay the only one to import panes.js.
import { panes } from './panes.js';
import { S, refreshInfo, writeHash } from './state.js';
import { COUNTER, GUTTER, HEAD, HOW, LANE, NARROW, ROW, RULER, SAMPLES, tracks } from './tracks.js';
import { $, clip, count, dur, fmtAt, placeTip, typing } from './util.js';
import { api, readAnswer } from './wire.js';

export const TL = {
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
    $('status').textContent = `${c.program || ''} (pid ${c.pid}) · ${count(c.events)} events · ${threadCount(c)}${c.live ? (c.status.done ? ' · connection ended' : ' · live') : ''}`;
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
    this.schedule();
    this.fetch();
  },

  // A redraw at the next animation frame, however many are asked before it (a drag or a
  // wheel asks one per event: each was drawn at once, several a frame).
  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => { this.frame = 0; this.draw(); });
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

  // Within a redraw the canvas's width is read once (`drawW`): read for every x, the layout
  // it forces was most of a redraw's time.
  x(ns) { return GUTTER + (ns - S.from) / (S.until - S.from) * (this.drawW || this.width()); },
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
      text = `${s ? clip(s[0]) : `<scope #${h.tr.site}>`}: a life of ${dur(h.life[1] - h.life[0])}${s ? ` · ${s[1]}:${s[2]}` : ''}\n${HOW[h.life[2]]}`;
    } else if (h.slice) {
      const s = c.scopes[h.slice.id];
      text = `${s ? clip(s[0]) : `<scope #${h.slice.id}>`}\n${dur(h.slice.e - h.slice.b)}${s ? ` · ${s[1]}:${s[2]}` : ''}${['', ' · abandoned', ' · cut', ' · still open'][h.slice.close]}`;
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
    placeTip(tip, x, y, r.width, r.height);
  },

  ...tracks,
  ...panes,
};

// The timeline's controls: wheel, mouse, keys, buttons, and the canvas's size.
// The capture's threads as `report` counts them (those that recorded no event too), and
// those with events where fewer.
function threadCount(c) {
  const withEvents = c.threads.length + ((c.left_out && c.left_out.threads) || 0);
  const named = Math.max(c.threads_named || 0, withEvents);
  return named === withEvents
    ? `${count(named)} threads`
    : `${count(named)} threads (${count(withEvents)} with events)`;
}

export function setupTimeline() {
  const canvas = $('tl-canvas');
  canvas.addEventListener('wheel', (e) => {
    e.preventDefault();
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY) * 2) {
      if (e.shiftKey) { S.scrollY += e.deltaY; TL.schedule(); } else TL.pan(e.deltaX);
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
    } else TL.schedule();
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
  // The timeline's keys anywhere on the page while its tab is shown (they worked only while
  // the canvas had the focus), but in a text box or with a modifier held.
  document.addEventListener('keydown', (e) => {
    if (S.tab !== 'timeline' || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    if (!$('help').hidden && e.key === 'Escape') return;
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
