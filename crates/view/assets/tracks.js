// The timeline's tracks drawn on its canvas: the ruler, counters, futures' and spans' lives,
// and each thread's scopes (per depth), busy pixels, CPU samples, frames, messages and
// losses. The methods are the timeline's (TL's, timeline.js): `this` is TL.
import { S } from './state.js';
import { $, count, dur, fit, fmtAt, scopeColour, setupCanvas } from './util.js';

// The layout, in CSS pixels: the names' gutter, the ruler, a scope's row, a track's header, the
// samples strip, a counter's track, a life's lane, the strip of lives narrower than a pixel.
export const GUTTER = 180, RULER = 24, ROW = 16, HEAD = 18, SAMPLES = 10, COUNTER = 34, LANE = 12, NARROW = 6;
// How a life ended (the server's codes).
export const HOW = ['ended', 'cancelled', 'still alive at the capture\'s end', 'begun before the capture started'];

export const tracks = {
  draw() {
    this.drawW = this.width();
    try {
      this.drawAll();
    } finally {
      this.drawW = 0;
    }
  },

  drawAll() {
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
    const tw = this.drawW;
    const scopeName = (id) => { const s = c.scopes[id]; return s ? s[0] : `<scope #${id}>`; };
    // The busy pixels of every track first, as one image under the rest.
    if (a) this.drawBusy(ctx, w, h);
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
      // Slices (the busy pixels are drawn already: drawBusy).
      const aw = a.until - a.from, npp = aw / a.px;
      ta.rows.forEach((row, d) => {
        const ry = y + HEAD + d * ROW;
        if (ry > h || ry + ROW < RULER) return;
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

  // The grey busy pixels of every thread's rows (time in scopes narrower than a pixel), as
  // one image: written into a buffer of the canvas's device pixels and drawn once. Drawn one
  // by one, with an alpha each, they were most of a redraw's time: 30,000 fillRects, 240 ms
  // for the 10 s demo in headless Chromium.
  drawBusy(ctx, w, h) {
    const a = this.answer;
    const dpr = window.devicePixelRatio || 1;
    const cw = Math.floor(w * dpr), ch = Math.floor(h * dpr);
    if (!this.busyImg || this.busyImg.width !== cw || this.busyImg.height !== ch) {
      this.busyImg = new ImageData(cw, ch);
      this.busyCanvas = new OffscreenCanvas(cw, ch);
    }
    const img = this.busyImg, px = new Uint32Array(img.data.buffer);
    px.fill(0);
    const npp = (a.until - a.from) / a.px;
    // The grey (138, 143, 152) at each of 256 alphas, as a little-endian RGBA word.
    if (!this.busyWords) {
      this.busyWords = new Uint32Array(256);
      for (let v = 0; v < 256; v++) {
        const al = Math.round(255 * (0.15 + 0.7 * v / 255));
        this.busyWords[v] = ((al << 24) | (152 << 16) | (143 << 8) | 138) >>> 0;
      }
    }
    const left = Math.ceil(GUTTER * dpr), top = Math.ceil(RULER * dpr);
    // One scan line per row, copied to each of the row's lines of pixels.
    const line = new Uint32Array(cw);
    let any = false;
    for (const tr of this.layout) {
      if (tr.kind !== 'thread') continue;
      const y = tr.y - S.scrollY;
      if (y > h || y + tr.h < RULER) continue;
      const ta = a.byIndex.get(tr.t.index);
      if (!ta) continue;
      ta.rows.forEach((row, d) => {
        const ry = y + HEAD + d * ROW;
        if (ry > h || ry + ROW < RULER || !row.busyPx.length) return;
        const y0 = Math.max(top, Math.round((ry + 1) * dpr)), y1 = Math.min(ch, Math.round((ry + ROW - 1) * dpr));
        if (y1 <= y0) return;
        line.fill(0);
        let lo = cw, hi = 0;
        for (let i = 0; i < row.busyPx.length; i++) {
          let x0 = Math.round(this.x(a.from + row.busyPx[i] * npp) * dpr);
          let x1 = Math.round(this.x(a.from + (row.busyPx[i] + 1) * npp) * dpr);
          if (x1 <= x0) x1 = x0 + 1;
          x0 = Math.max(x0, left); x1 = Math.min(x1, cw);
          if (x1 <= x0) continue;
          const word = this.busyWords[row.busyV[i]];
          for (let x = x0; x < x1; x++) line[x] = word;
          if (x0 < lo) lo = x0;
          if (x1 > hi) hi = x1;
        }
        if (hi <= lo) return;
        const part = line.subarray(lo, hi);
        for (let yy = y0; yy < y1; yy++) px.set(part, yy * cw + lo);
        any = true;
      });
    }
    if (!any) return;
    const oc = this.busyCanvas.getContext('2d');
    oc.putImageData(img, 0, 0);
    ctx.drawImage(this.busyCanvas, 0, 0, w, h);
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
    // The name left of the value column (a long name ran under the values).
    ctx.fillText(fit(ctx, name, GUTTER - 66), 6, y + 10);
    const co = a && a.counters.get(String(tr.id));
    if (!co || co.px.length === 0) return;
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < co.px.length; i++) { lo = Math.min(lo, co.min[i]); hi = Math.max(hi, co.max[i]); }
    ctx.fillStyle = '#6b6f76';
    ctx.fillText(compact(hi), GUTTER - 56, y + 8);
    ctx.fillText(compact(lo), GUTTER - 56, y + tr.h - 10);
    const range = hi - lo;
    const yy = (v) => (range > 0 ? y + tr.h - 4 - (v - lo) / range * (tr.h - 8) : y + tr.h / 2);
    const npp = (a.until - a.from) / a.px;
    ctx.fillStyle = '#00897b';
    // A counter holds its value until it is set again: the value a pixel ended on is drawn
    // on to the next pixel set (or the capture's end), where only the pixels set were drawn
    // and a counter set now and then looked dashed.
    const end = this.x(c.duration_ns || a.until);
    for (let i = 0; i < co.px.length; i++) {
      const x0 = this.x(a.from + co.px[i] * npp), x1 = this.x(a.from + (co.px[i] + 1) * npp);
      if (x0 > w) break;
      const next = i + 1 < co.px.length ? this.x(a.from + co.px[i + 1] * npp) : end;
      const from = Math.max(x1, GUTTER), to = Math.min(next, w);
      if (to > from) ctx.fillRect(from, Math.round(yy(co.last[i])) - 1, to - from, 2);
      if (x1 < GUTTER) continue;
      const top = yy(co.max[i]), bot = yy(co.min[i]);
      ctx.fillRect(Math.max(x0, GUTTER), top, Math.max(1, x1 - x0), Math.max(1.5, bot - top));
    }
  },
};

// A counter's value in at most four significant digits and a suffix (17280000: 17.28M), to
// fit the value column.
function compact(v) {
  const a = Math.abs(v);
  for (const [d, u] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e4, 'k']]) if (a >= d) return `${+(v / d).toPrecision(4)}${u}`;
  return `${+v.toPrecision(4)}`;
}
