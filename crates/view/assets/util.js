// What every view uses: the DOM, numbers and durations as tickscope prints them, colours,
// text on a canvas.

export const $ = (id) => document.getElementById(id);

// Durations as tickscope prints them (tickscope_fmt::duration): three significant digits.
export function dur(ns) {
  if (!Number.isFinite(ns) || ns < 0) return '-';
  if (ns < 999.5) return `${Math.round(ns)} ns`;
  let v, u;
  if (ns < 999.5e3) { v = ns / 1e3; u = 'µs'; } else if (ns < 999.5e6) { v = ns / 1e6; u = 'ms'; } else { v = ns / 1e9; u = 's'; }
  return `${v < 9.995 ? v.toFixed(2) : v < 99.95 ? v.toFixed(1) : v.toFixed(0)} ${u}`;
}

// A time since the capture's start, with as many decimals as `step` (ns) needs.
export function fmtAt(ns, step) {
  const [scale, unit] = Math.abs(ns) >= 1e9 || step >= 1e8 ? [1e9, 's'] : Math.abs(ns) >= 1e6 || step >= 1e5 ? [1e6, 'ms'] : [1e3, 'µs'];
  const digits = Math.max(0, Math.min(6, Math.ceil(-Math.log10(Math.max(step, 1) / scale))));
  return `${(ns / scale).toFixed(digits)} ${unit}`;
}

export function count(n) {
  return n.toLocaleString('en-US');
}

export function el(tag, attrs, ...kids) {
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
export function colour(s, light) {
  return `hsl(${hue(s)}, 62%, ${light || 72}%)`;
}
// A capture's scope by id: ids are small and dense, so golden-angle steps keep neighbours
// apart.
export function scopeColour(id, light) {
  return `hsl(${Math.round((id * 137.508) % 360)}, 60%, ${light || 72}%)`;
}

// Text that fits `w` pixels, cut with an ellipsis.
export function fit(ctx, text, w) {
  if (w < 14) return '';
  if (ctx.measureText(text).width <= w) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, mid) + '…').width <= w) lo = mid; else hi = mid - 1;
  }
  return lo > 0 ? text.slice(0, lo) + '…' : '';
}

export function setupCanvas(canvas) {
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

// A path's file name.
export function short(path) {
  return String(path).split('/').pop();
}

// A value in a profile's unit.
export function fmtUnit(v, unit) {
  if (unit === 'nanoseconds') return dur(v);
  if (unit === 'bytes') {
    // As tickscope top prints them (pprof's units: 1 kB = 1,024 B).
    for (const [n, d] of [['GB', 2 ** 30], ['MB', 2 ** 20], ['kB', 2 ** 10]]) if (Math.abs(v) >= d) return `${(v / d).toFixed(2)}${n}`;
    return `${v}B`;
  }
  return count(v);
}

// A name cut in its middle past `max` characters (a tooltip shows a 10,000-character name's
// two ends, not a wall of text).
export function clip(name, max = 400) {
  const s = String(name);
  return s.length <= max ? s : `${s.slice(0, max / 2)}…${s.slice(-max / 2)}`;
}

// Places tooltip `tip` near the pointer at (x, y) in its positioned parent's coordinates
// (`w` × `h` of it visible): right of and below the pointer, or left of / above it where it
// would leave the parent or the window.
export function placeTip(tip, x, y, w, h) {
  const parent = tip.parentElement.getBoundingClientRect();
  const right = Math.min(w, window.innerWidth - parent.left);
  const bottom = Math.min(h, window.innerHeight - parent.top);
  const tw = tip.offsetWidth, th = tip.offsetHeight;
  const left = x + 14 + tw <= right ? x + 14 : Math.max(0, x - 14 - tw);
  const top = y + 16 + th <= bottom ? y + 16 : Math.max(0, y - 12 - th);
  tip.style.left = `${left}px`;
  tip.style.top = `${top}px`;
}

// `v` (not negative) with one decimal as tickscope's CLI prints it (Rust's `{:.1}`: a tie such as 13.25 goes
// to the even digit, 13.2, where toFixed gives 13.3).
export function fixed1(v) {
  const q = v * 4;
  if (Number.isInteger(q) && q % 4 === 1) return (Math.floor(v * 10) / 10).toFixed(1);
  return v.toFixed(1);
}

// Whether keys pressed in element `t` are its text (a text box, a select), so that the page's
// shortcuts leave them alone; a checkbox or a button is not.
export function typing(t) {
  if (!(t instanceof HTMLElement)) return false;
  if (t.isContentEditable || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT') return true;
  return t.tagName === 'INPUT' && !['checkbox', 'radio', 'button', 'submit', 'reset', 'range', 'color'].includes(t.type);
}
