#!/usr/bin/env node
// Import profile files into the real speedscope web app (the release bundle shipped in the
// `speedscope` npm package) running in headless Debian Chromium, and report whether each
// file was imported.
//
// usage: node tests/readers/speedscope-import.mjs [--strict] [--timeout-ms MS] FILE [FILE...]
//
//   --strict      also fail a file when speedscope logged warnings while importing it
//                 (e.g. Chrome-trace slices that do not nest: "Tried to end X when Y was on
//                 the top of the stack", "Frame X was still open at end of profile")
//   --timeout-ms  per-file limit for a verdict (default 20000, or $SPEEDSCOPE_IMPORT_TIMEOUT_MS)
//
// Prints one JSON line per FILE on stdout:
//   {"file": "...", "ok": true|false, "profiles": N|null, "name": "...",
//    "profile_names": [...], "importer": "...", "warnings": [...], "error": "...", "ms": N}
// Exit status: 0 when every file was imported, 1 when any was not, 2 on a usage or setup
// error (bad arguments, speedscope bundle or Chromium missing).
//
// How success and failure are decided (speedscope 1.25.0, src/views/application.tsx):
//  * success: the toolbar's "⤴️Export" tab. speedscope renders it only when it has an
//    active profile, i.e. after `setProfileGroup()`, which it calls only when the importer
//    returned a profile group with at least one profile. Next to it the toolbar shows the
//    profile name and, for several profiles, "(1/N)" plus a hidden profile list
//    (`tr[title]` rows) that gives every profile's name.
//  * failure: an `alert()` ("Unrecognized format! ...", "Successfully imported profile,
//    but it's empty!"), the error view "😿 Something went wrong." (the importer threw; the
//    exception is logged as "Failed to load format ..."), an uncaught page error, a
//    console.error, the profile never being fetched from our server, or no verdict
//    within the timeout (default 20 s per file).
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  // speedscope draws with WebGL; with --disable-gpu Chromium falls back to SwiftShader.
  // Newer Chromium releases only allow that fallback with this flag; without WebGL
  // speedscope never imports anything (it returns early when it has no GL canvas).
  '--enable-unsafe-swiftshader',
];

function usage(msg) {
  if (msg) process.stderr.write(`speedscope-import: ${msg}\n`);
  process.stderr.write('usage: node speedscope-import.mjs [--strict] [--timeout-ms MS] FILE [FILE...]\n');
  process.exit(2);
}

let timeoutMs = Number(process.env.SPEEDSCOPE_IMPORT_TIMEOUT_MS || 20000);
let strict = false;
const files = [];
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--strict') {
      strict = true;
    } else if (a === '--timeout-ms') {
      timeoutMs = Number(argv[++i]);
    } else if (a === '-h' || a === '--help') {
      usage();
    } else if (a === '--') {
      files.push(...argv.slice(i + 1));
      break;
    } else if (a.startsWith('--')) {
      usage(`unknown option ${a}`);
    } else {
      files.push(a);
    }
  }
  if (!files.length) usage('no FILE given');
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) usage('bad --timeout-ms');
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function failAll(error) {
  for (const f of files) {
    emit({ file: f, ok: false, profiles: null, name: null, profile_names: [], importer: null,
      warnings: [], error, ms: 0 });
  }
  process.exit(2);
}

// The speedscope release bundle (index.html + speedscope-*.js) inside the npm package.
let bundleDir;
try {
  bundleDir = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist', 'release');
} catch {
  failAll(`npm package speedscope not found (run tests/readers/install.sh)`);
}
if (!existsSync(path.join(bundleDir, 'index.html'))) failAll(`no index.html in ${bundleDir}`);
if (!existsSync(CHROMIUM)) failAll(`${CHROMIUM} not found (run tests/readers/install.sh)`);

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  failAll(`npm package playwright-core not found (run tests/readers/install.sh): ${e.message}`);
}

const MIME = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
  '.ico': 'image/x-icon', '.woff2': 'font/woff2', '.txt': 'text/plain',
};

// url path "/p/<id>/<basename>" -> { path, fetched } ; everything else is the bundle.
const served = new Map();
let nextId = 0;
const server = createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://127.0.0.1');
    const pathname = decodeURIComponent(url.pathname);
    let file;
    const entry = served.get(pathname);
    if (entry) {
      entry.fetched++;
      file = entry.path;
    } else {
      const rel = pathname === '/' ? 'index.html' : pathname.replace(/^\/+/, '');
      file = path.join(bundleDir, rel);
      if (!file.startsWith(bundleDir + path.sep)) throw new Error('outside bundle');
    }
    const body = await readFile(file);
    res.writeHead(200, {
      'content-type': entry ? 'application/octet-stream'
        : (MIME[path.extname(file)] || 'application/octet-stream'),
      'cache-control': 'no-store',
    });
    res.end(body);
  } catch {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
  }
});
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(0, '127.0.0.1', resolve);
});
const base = `http://127.0.0.1:${server.address().port}`;

let browser;
try {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 30000 });
} catch (e) {
  server.close();
  failAll(`cannot launch ${CHROMIUM}: ${e.message.split('\n')[0]}`);
}

// Runs in the page: null while importing, else the verdict read from the DOM.
function pageState() {
  const body = document.body;
  if (!body) return null;
  const text = body.innerText || '';
  if (text.includes('Something went wrong.')) return { state: 'error' };
  const exportTab = [...document.querySelectorAll('div')].find(
    (d) => d.lastChild && d.lastChild.nodeType === Node.TEXT_NODE && d.lastChild.textContent === 'Export');
  if (!exportTab) return null;
  const toolbar = exportTab.parentElement && exportTab.parentElement.parentElement;
  if (!toolbar) return null;
  const kids = [...toolbar.childNodes];
  // toolbar = [left (view tabs), center (profile name), right (Export/Import/...)]
  // One profile: the center is bare text. Several: a div holding
  // <span>NAME <span>(i/N)</span></span> and a hidden profile list (table rows).
  const center = kids.slice(1, -1);
  const centerText = center.map((n) => {
    if (n.nodeType !== Node.ELEMENT_NODE) return n.textContent;
    const label = n.querySelector(':scope > span');
    return label ? label.textContent : n.textContent;
  }).join('').trim();
  const rows = [...toolbar.querySelectorAll('tr[title]')].map((r) => r.getAttribute('title'));
  const m = centerText.match(/\((\d+)\/(\d+)\)\s*$/);
  let profiles = 1;
  let active = centerText;
  if (m) {
    profiles = Number(m[2]);
    active = centerText.slice(0, m.index).trim();
  }
  const title = document.title.replace(/ - speedscope$/, '');
  return { state: 'ok', profiles, active, names: rows.length ? rows : [active], title };
}

async function importOne(file) {
  const t0 = Date.now();
  const result = { file, ok: false, profiles: null, name: null, profile_names: [], importer: null,
    warnings: [], error: null, ms: 0 };
  const finish = () => { result.ms = Date.now() - t0; return result; };
  try {
    const st = await stat(file);
    if (!st.isFile()) throw new Error('not a regular file');
  } catch (e) {
    result.error = `cannot read ${file}: ${e.message}`;
    return finish();
  }
  // speedscope picks some importers by file name, so keep the file's own name in the URL.
  const id = `/p/${nextId++}/${path.basename(file)}`;
  const entry = { path: path.resolve(file), fetched: 0 };
  served.set(id, entry);

  const errors = [];
  let failLog = null;
  let webgl = false;
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  try {
    const page = await context.newPage();
    let rejectEarly;
    const early = new Promise((_, reject) => { rejectEarly = reject; });
    early.catch(() => {});
    page.on('dialog', (d) => {
      errors.push(`alert: ${d.message()}`);
      d.dismiss().catch(() => {});
      rejectEarly(new Error(`alert: ${d.message()}`));
    });
    page.on('pageerror', (e) => {
      errors.push(`page error: ${e.message}`);
      rejectEarly(new Error(`page error: ${e.message}`));
    });
    page.on('console', (m) => {
      const t = m.text();
      if (m.type() === 'error') {
        errors.push(`console.error: ${t}`);
      } else if (m.type() === 'warning') {
        if (!t.includes('GL Driver Message')) result.warnings.push(t);
      } else if (t.startsWith('Importing as ')) {
        result.importer = t.slice('Importing as '.length);
      } else if (t.startsWith('Failed to load format')) {
        failLog = t.split('\n')[0];
      } else if (t.startsWith('WebGL initialized')) {
        webgl = true;
      }
    });
    const profileUrl = base + id.split('/').map(encodeURIComponent).join('/');
    const url = `${base}/index.html#profileURL=${encodeURIComponent(profileUrl)}`;
    const deadline = t0 + timeoutMs;
    await Promise.race([page.goto(url, { timeout: timeoutMs, waitUntil: 'load' }), early]);
    const verdict = await Promise.race([
      page.waitForFunction(pageState, null, { timeout: Math.max(1, deadline - Date.now()), polling: 50 })
        .then((h) => h.jsonValue()),
      early,
    ]);
    if (verdict.state === 'ok') {
      // Let the flame chart render a few frames: errors thrown while drawing the imported
      // profile count as failures too.
      await Promise.race([
        page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))),
        early,
      ]);
      await Promise.race([page.waitForTimeout(200), early]);
      result.profiles = verdict.profiles;
      result.name = verdict.title;
      result.profile_names = verdict.names;
      if (entry.fetched === 0) errors.push('speedscope never fetched the profile from the test server');
      if (strict && result.warnings.length) {
        errors.push(`--strict: speedscope warned: ${result.warnings.join(' | ')}`);
      }
      if (errors.length === 0) result.ok = true;
    } else {
      errors.push(`speedscope: Something went wrong${failLog ? ` (${failLog})` : ''}`);
    }
  } catch (e) {
    if (!errors.length) {
      if (e.name === 'TimeoutError') {
        errors.push(`no import verdict within ${timeoutMs} ms` +
          (webgl ? '' : ' (speedscope never reported WebGL; it cannot import without it)'));
      } else {
        errors.push(e.message.split('\n')[0]);
      }
    }
  } finally {
    await context.close().catch(() => {});
    served.delete(id);
  }
  if (!result.ok) result.error = errors.join('; ') || 'unknown failure';
  return finish();
}

let allOk = true;
try {
  for (const f of files) {
    const r = await importOne(f);
    if (!r.ok) allOk = false;
    emit(r);
  }
} finally {
  await browser.close().catch(() => {});
  server.close();
}
process.exit(allOk ? 0 : 1);
