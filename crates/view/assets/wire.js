// The server's answers: everything the page shows comes from this server's /api (the token in
// the page's URL authorises each request); nothing is fetched from anywhere else.

const TOKEN = new URLSearchParams(location.search).get('token') || '';

function query(params) {
  const q = new URLSearchParams({ token: TOKEN });
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null) q.set(k, v);
  return q.toString();
}

// An answer of /api/PATH: JSON, or bytes when `binary`; an Error (with the HTTP status) when
// the server refused or is not ready yet (202).
export async function api(path, params, binary) {
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

// A window's answer (crates/view/src/wire.rs).
export function readAnswer(buf) {
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
    const px = new Uint16Array(n), min = new Float32Array(n), max = new Float32Array(n), last = new Float32Array(n);
    for (let i = 0; i < n; i++) { px[i] = u16(); min[i] = f32(); max[i] = f32(); last[i] = f32(); }
    a.counters.set(String(id), { px, min, max, last });
  }
  return a;
}
