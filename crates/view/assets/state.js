// What the page shows, and the URL's hash that holds it (a reload or a shared link restores
// the view).
import { api } from './wire.js';

export const S = {
  info: null,
  tab: 'timeline',
  c: 0, // capture shown
  p: 0, // profile shown
  pv: 'flame', // profile view
  fn: null, // function of the sandwich and source views
  si: null, // sample type shown (index), null: the profile's default
  zoom: 0, // the profile's flame graph's root (a node of its tree; 0: the whole)
  q: '', // the profile's flame graph's search
  dw: 'both', // the diff's frame widths: 'both', 'new' or 'base'
  norm: false, // the diff's base scaled to the new profile's total
  from: null, until: null, // timeline window, ns
  sel: null, // selected range [from, until]
  scrollY: 0,
  follow: false,
  highlight: null, // scope id
};

// Reads the view from the hash; what it does not name goes back to its default (so that
// Back, or an edited hash, shows what the hash says and nothing left from before).
export function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.get('t')) S.tab = h.get('t');
  for (const k of ['c', 'p']) if (h.get(k) !== null) S[k] = Number(h.get(k)) || 0;
  S.pv = h.get('pv') || 'flame';
  S.fn = h.get('fn') || null;
  S.si = h.get('si') !== null && /^\d+$/.test(h.get('si')) ? Number(h.get('si')) : null;
  S.zoom = /^\d+$/.test(h.get('z') || '') ? Number(h.get('z')) : 0;
  S.q = h.get('q') || '';
  S.dw = ['new', 'base'].includes(h.get('dw')) ? h.get('dw') : 'both';
  S.norm = h.get('norm') === '1';
  if (h.get('from') && h.get('until')) { S.from = Number(h.get('from')); S.until = Number(h.get('until')); }
  S.sel = null;
  if (h.get('sel')) {
    const [a, b] = h.get('sel').split(',').map(Number);
    if (b > a) S.sel = [a, b];
  }
}

// The hash written last (what a `hashchange` of our own would bring back), and the place
// it named: a new place (another tab, file, view or function) is a history entry of its
// own, for Back to return to; a window moved or a range selected replaces the current one.
export const written = { hash: null, place: null };

let hashTimer = 0;
export function writeHash() {
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
      if (S.si !== null) h.set('si', S.si);
      if (S.zoom) h.set('z', S.zoom);
      if (S.q) h.set('q', S.q);
    } else if (S.tab === 'diff') {
      if (S.si !== null) h.set('si', S.si);
      if (S.dw !== 'both') h.set('dw', S.dw);
      if (S.norm) h.set('norm', '1');
    }
    const place = [S.tab, S.tab === 'timeline' ? S.c : S.p, S.tab === 'profile' ? `${S.pv}/${S.fn}` : ''].join('|');
    const url = `${location.pathname}${location.search}#${h}`;
    if (written.place !== null && place !== written.place) history.pushState(null, '', url);
    else history.replaceState(null, '', url);
    written.hash = `#${h}`;
    written.place = place;
  }, 100);
}

// What the server holds: the files, each capture's threads, scopes, markers and state.
export async function refreshInfo() {
  S.info = await api('info');
}
