// Flame graphs (a profile's, the CPU samples of a timeline's range, a diff's) on a canvas:
// click a frame to zoom in (the root to zoom out), double-click for its callers and callees.
import { clip, colour, count, dur, el, fit, placeTip, setupCanvas } from './util.js';

export class Flame {
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
    // A double-click's first click has zoomed already, which moves the frame under the
    // pointer: the frame picked is the one that first click hit.
    canvas.addEventListener('dblclick', () => {
      const n = this.clicked;
      if (n > 0 && this.opts.onPick) this.opts.onPick(this.name(n));
    });
  }

  set(tree) {
    this.tree = tree;
    this.root = 0;
    this.layout();
    this.draw();
  }

  // Each frame's offset in its parent (children in order; parents come before children),
  // from the widths: again when a diff's widths change.
  layout() {
    const tree = this.tree;
    const n = tree.parent.length;
    const d = this.opts.diff ? this.opts.diffBy() : null;
    // A diff's base scaled to the new profile's total where normalised.
    this.baseScale = d && d.normalised && tree.base_cum[0] > 0 ? tree.cum[0] / tree.base_cum[0] : 1;
    this.widthBy = d ? d.width : 'new';
    this.x = new Float64Array(n);
    this.maxDepth = 0;
    this.depth = new Uint16Array(n);
    for (let i = 1; i < n; i++) {
      const d = this.depth[tree.parent[i]] + 1;
      this.depth[i] = d;
      if (d > this.maxDepth) this.maxDepth = d;
    }
    // Children side by side from their parent's left edge: in the tree's order (one pass),
    // or the widest first where asked (the callers' icicle: the heaviest functions leftmost),
    // each parent's children then listed in typed arrays and sorted.
    if (!(this.opts.widestFirst && this.opts.widestFirst())) {
      const next = new Float64Array(n);
      for (let i = 1; i < n; i++) {
        const p = tree.parent[i];
        this.x[i] = next[p] + this.x[p];
        next[p] += this.width(i);
      }
      return;
    }
    const start = new Uint32Array(n + 1);
    for (let i = 1; i < n; i++) start[tree.parent[i] + 1]++;
    for (let p = 0; p < n; p++) start[p + 1] += start[p];
    const kids = new Uint32Array(Math.max(n - 1, 0));
    const fillAt = start.slice(0, n);
    for (let i = 1; i < n; i++) kids[fillAt[tree.parent[i]]++] = i;
    const wid = new Float64Array(n);
    for (let i = 0; i < n; i++) wid[i] = this.width(i);
    for (let p = 0; p < n; p++) {
      const c = kids.subarray(start[p], start[p + 1]);
      if (c.length > 1) c.sort((a, b) => wid[b] - wid[a]);
      let at = this.x[p];
      for (let k = 0; k < c.length; k++) { this.x[c[k]] = at; at += wid[c[k]]; }
    }
  }

  // A frame's base figure, scaled where the diff is normalised.
  base(i) {
    return this.tree.base_cum[i] * this.baseScale;
  }

  // A frame's width: its time in the profile, or in a diff the new profile's, the base's,
  // or both together (the default: a frame found only in the base is drawn too).
  width(i) {
    const t = this.tree;
    if (!this.opts.diff) return t.cum[i];
    const nw = Math.max(t.cum[i], 0), b = Math.max(this.base(i), 0);
    return this.widthBy === 'base' ? b : this.widthBy === 'both' ? nw + b : nw;
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
    // Sized again, and the root scrolled into view, when the box itself changed too (drawn
    // while hidden, say: a range's samples before their tab is shown).
    if (this.canvas.style.height !== `${tall}px` || this.wasIcicle !== icicleNow || this.boxH !== box.clientHeight) {
      this.canvas.style.height = `${tall}px`;
      // The root in view: at the bottom of a flame graph, the top of an icicle.
      box.scrollTop = icicleNow ? 0 : box.scrollHeight;
      this.wasIcicle = icicleNow;
      this.boxH = box.clientHeight;
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
      for (let i = 1; i < t.cum.length; i++) maxDelta = Math.max(maxDelta, Math.abs(t.cum[i] - this.base(i)));
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
        const d = (t.cum[i] - this.base(i)) / maxDelta;
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
    const name = clip(this.name(i));
    let text = `${name}\n${this.value(t.cum[i])} (${pct(t.cum[i])}) · self ${this.value(t.flat[i])}`;
    if (this.opts.diff) text = `${name}\nnew ${this.value(t.cum[i])} · base ${this.value(t.base_cum[i])} · change ${t.cum[i] - t.base_cum[i] >= 0 ? '+' : ''}${this.value(t.cum[i] - t.base_cum[i]).replace(/^-/, '−')}`;
    tip.textContent = text;
    tip.hidden = false;
    const box = tip.parentElement;
    const r = box.getBoundingClientRect();
    // In the box's scrolled content: what is visible of it is scrollTop to + clientHeight.
    placeTip(tip, e.clientX - r.left, e.clientY - r.top + box.scrollTop, box.clientWidth, box.scrollTop + box.clientHeight);
  }

  hover(e) {
    this.tip(e, this.hit(e));
  }

  click(e) {
    // A double-click's second click (`detail` 2) neither zooms again nor moves the pick.
    if (e.detail > 1) return;
    const i = this.hit(e);
    this.clicked = i;
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

// The tooltip of the flame graph on `canvas`, made once.
export function flameBox(canvas) {
  const box = canvas.parentElement;
  let tip = box.querySelector('.tip');
  if (!tip) {
    tip = el('div', { class: 'tip', hidden: true });
    tip.id = '';
    box.append(tip);
  }
  return tip;
}
