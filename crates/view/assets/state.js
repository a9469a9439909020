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
  from: null, until: null, // timeline window, ns
  sel: null, // selected range [from, until]
  scrollY: 0,
  follow: false,
  highlight: null, // scope id
};

export function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.get('t')) S.tab = h.get('t');
  for (const k of ['c', 'p']) if (h.get(k) !== null) S[k] = Number(h.get(k)) || 0;
  if (h.get('pv')) S.pv = h.get('pv');
  if (h.get('fn')) S.fn = h.get('fn');
  if (h.get('si') !== null && /^\d+$/.test(h.get('si'))) S.si = Number(h.get('si'));
  if (h.get('from') && h.get('until')) { S.from = Number(h.get('from')); S.until = Number(h.get('until')); }
  if (h.get('sel')) {
    const [a, b] = h.get('sel').split(',').map(Number);
    if (b > a) S.sel = [a, b];
  }
}

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
    } else if (S.tab === 'diff' && S.si !== null) h.set('si', S.si);
    history.replaceState(null, '', `${location.pathname}${location.search}#${h}`);
  }, 100);
}

// What the server holds: the files, each capture's threads, scopes, markers and state.
export async function refreshInfo() {
  S.info = await api('info');
}
