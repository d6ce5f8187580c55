// node browser_test.mjs --npm DIR --chromium PATH --artifacts DIR NAME=PAGE.html,EXPECT.json ...
//
// `recap report`'s pages in a real browser (issue 41, docs/report.md): puppeteer-core, loaded
// from DIR/node_modules, drives PATH (Debian's /usr/bin/chromium, headless; nothing is
// downloaded). For each page, EXPECT.json is what tests/report/expect.py computed from the
// session's history (`recap export --history`): the turns, the compactions, the messages sent
// now, the events by kind, the hostile texts. Checked:
//   - the page loads from file:// with no console error, no page error and no request but the
//     file itself, and holds no script;
//   - svg#chart: one circle.point per turn (the same turns), one g.mark[data-kind=compaction]
//     per compaction, every mark on a turn that has a point, the limits' lines;
//   - ol#conversation > li.msg: one per message sent now; clicking a fold's summary shows its
//     ol.originals (and a nested fold's, when a checkpoint folds an earlier one);
//   - section.checkpoint-sections: one per checkpoint;
//   - li.event: one per event of the session; clicking a kind's label hides the other kinds,
//     clicking "all" shows them again;
//   - the hostile texts are in the page's text, and nothing was injected (no img, iframe,
//     script, object or embed; no on* attribute; window.__recapInjected unset).
// Reported, not failed on: the time from navigation start to first paint, DOMContentLoaded and
// load, with the file's size; notes on the layout (horizontal overflow at phone width,
// overlapping marks, the chart's text size). Screenshots (PNG) go to DIR: the top of the page,
// NAME-wide.png (1366×900) and NAME-phone.png (390×844 at 2x), the chart at phone width
// NAME-chart-phone.png, and at 1366×900 the opened fold (NAME-fold-wide.png) and the events
// filtered to one kind (NAME-events-wide.png).
// Exit: 0 every check passed, 1 a check failed, 2 usage or the browser could not start.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const opt = { npm: process.env.RECAP_NPM_DIR || '', chromium: '/usr/bin/chromium', artifacts: '', pages: [] };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const next = () => argv[++i];
  if (a === '--npm') opt.npm = next();
  else if (a === '--chromium') opt.chromium = next();
  else if (a === '--artifacts') opt.artifacts = next();
  else if (/^[A-Za-z0-9_-]+=/.test(a)) {
    const [name, rest] = [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)];
    const [page, expect] = rest.split(',');
    opt.pages.push({ name, page: path.resolve(page), expect: path.resolve(expect) });
  } else {
    console.error(`browser_test: unknown argument ${a}`);
    process.exit(2);
  }
}
if (!opt.npm || !opt.artifacts || opt.pages.length === 0) {
  console.error('usage: node browser_test.mjs --npm DIR [--chromium PATH] --artifacts DIR NAME=PAGE.html,EXPECT.json ...');
  process.exit(2);
}
let puppeteer;
try {
  puppeteer = createRequire(path.join(path.resolve(opt.npm), 'package.json'))('puppeteer-core');
} catch (e) {
  console.error(`browser_test: cannot load puppeteer-core from ${opt.npm}/node_modules: ${e.message}`);
  process.exit(2);
}
fs.mkdirSync(opt.artifacts, { recursive: true });

let passed = 0;
const failures = [];
const notes = [];
const check = (page, what, ok, detail = '') => {
  if (ok) {
    passed++;
    console.log(`  ok    ${what}`);
  } else {
    failures.push(`${page}: ${what}${detail ? `: ${detail}` : ''}`);
    console.log(`  FAIL  ${what}${detail ? `: ${detail}` : ''}`);
  }
};
const note = (page, text) => {
  notes.push(`${page}: ${text}`);
  console.log(`  note  ${text}`);
};
const sameSet = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);
const ms = (v) => (v == null ? 'n/a' : `${Math.round(v)} ms`);
const WIDE = { width: 1366, height: 900, deviceScaleFactor: 1 };
const PHONE = { width: 390, height: 844, deviceScaleFactor: 2, isMobile: true, hasTouch: true };

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'recap-report-chromium-'));
let browser;
try {
  browser = await puppeteer.launch({
    executablePath: opt.chromium,
    headless: true,
    userDataDir: profile,
    protocolTimeout: 240000,
    args: [
      ...(process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : []),
      '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check',
      '--disable-extensions', '--disable-background-networking', '--disable-component-update',
      '--disable-sync',
      // The page must load nothing: a name it tried to resolve would fail, and be seen below.
      '--host-resolver-rules=MAP * ~NOTFOUND',
    ],
  });
} catch (e) {
  console.error(`browser_test: ${opt.chromium} did not start: ${e.message.split('\n')[0]}`);
  fs.rmSync(profile, { recursive: true, force: true });
  process.exit(2);
}
console.log(`browser_test: ${await browser.version()} (${opt.chromium}), puppeteer-core ${createRequire(path.join(path.resolve(opt.npm), 'package.json'))('puppeteer-core/package.json').version}`);

try {
  for (const p of opt.pages) await testPage(p);
} catch (e) {
  failures.push(`stopped: ${e.stack || e}`);
  console.log(`  FAIL  stopped: ${e.message}`);
} finally {
  await browser.close().catch(() => {});
  fs.rmSync(profile, { recursive: true, force: true });
}

console.log(`browser_test: ${passed} checks passed, ${failures.length} failed` +
  (notes.length ? `, ${notes.length} notes` : ''));
for (const f of failures) console.log(`  failed: ${f}`);
process.exit(failures.length === 0 ? 0 : 1);

async function testPage({ name, page: file, expect: expectFile }) {
  const started = Date.now();
  const expect = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
  const url = pathToFileURL(file).href;
  const size = fs.statSync(file).size;
  console.log(`page ${name}: ${file} (${size.toLocaleString('en')} bytes; session '${expect.session}', ` +
    `${expect.turns.length} turns, ${expect.compactions} compactions, ${expect.active} messages sent now)`);
  const page = await browser.newPage();
  page.setDefaultTimeout(180000);
  await page.setViewport(WIDE);
  const errors = [];
  const requests = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('request', (r) => { if (r.url() !== url) requests.push(r.url()); });
  page.on('requestfailed', (r) => { if (r.url() === url) errors.push(`the page itself failed: ${r.failure()?.errorText}`); });

  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load', timeout: 180000 });
  const wall = Date.now() - t0;
  // The paint entries come once a frame was presented: waited for, up to 3 s.
  await page.evaluate(() => new Promise((resolve) => {
    const until = Date.now() + 3000;
    const poll = () => (performance.getEntriesByType('paint').length > 0 || Date.now() > until
      ? resolve() : setTimeout(poll, 50));
    poll();
  }));
  const timing = await page.evaluate(() => {
    const n = performance.getEntriesByType('navigation')[0];
    const paint = Object.fromEntries(performance.getEntriesByType('paint').map((e) => [e.name, e.startTime]));
    return n ? { dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, fp: paint['first-paint'],
      fcp: paint['first-contentful-paint'] } : {};
  });
  console.log(`  time  ${name}: ${(size / 1e6).toFixed(1)} MB; navigation start → first paint ${ms(timing.fp)}, ` +
    `first contentful paint ${ms(timing.fcp)}, DOMContentLoaded ${ms(timing.dcl)}, load ${ms(timing.load)} ` +
    `(goto returned after ${wall} ms)`);

  // Screenshots first, of the page as it opens: wide, then phone; the layout is noted at both.
  await page.screenshot({ path: path.join(opt.artifacts, `${name}-wide.png`) });
  await layoutNotes(page, name, 1366);
  await page.setViewport(PHONE);
  await page.screenshot({ path: path.join(opt.artifacts, `${name}-phone.png`) });
  const chart = await page.$('svg#chart');
  if (chart) await chart.screenshot({ path: path.join(opt.artifacts, `${name}-chart-phone.png`) });
  await layoutNotes(page, name, 390);
  await page.setViewport(WIDE);

  // The page loads nothing and runs nothing.
  check(name, 'no console error and no page error', errors.length === 0, errors.slice(0, 5).join(' | '));
  check(name, 'no request but the file itself', requests.length === 0, requests.slice(0, 5).join(' '));
  const statics = await page.evaluate(() => ({
    scripts: document.scripts.length,
    external: [...document.querySelectorAll('link[href], [src], object, embed, iframe, image, use[href]')].length,
  }));
  check(name, 'no script and no element that loads something', statics.scripts === 0 && statics.external === 0,
    JSON.stringify(statics));

  // The chart against the session's history.
  const chartData = await page.evaluate(() => ({
    svg: !!document.querySelector('svg#chart'),
    turns: [...document.querySelectorAll('svg#chart circle.point')].map((c) => Number(c.dataset.turn)),
    tokensOk: [...document.querySelectorAll('svg#chart circle.point')].every((c) => /^\d+$/.test(c.dataset.tokens || '')),
    marks: [...document.querySelectorAll('svg#chart g.mark')].map((g) => ({
      kind: g.dataset.kind, turn: Number(g.dataset.turn), commit: g.dataset.commit,
      box: (() => { const r = g.getBoundingClientRect(); return [r.left, r.right]; })() })),
    limits: [...document.querySelectorAll('svg#chart line.limit')].map((l) => l.dataset.kind),
  }));
  check(name, 'svg#chart is there', chartData.svg);
  check(name, `one circle.point per turn (${expect.turns.length})`, chartData.turns.length === expect.turns.length,
    `${chartData.turns.length} points`);
  check(name, 'the points are the session\'s turns, in order, each once',
    sameSet(chartData.turns, expect.turns),
    `first differences: ${chartData.turns.filter((t, i) => t !== expect.turns[i]).slice(0, 5).join(',')}`);
  check(name, 'every point has data-tokens', chartData.tokensOk);
  const compactionMarks = chartData.marks.filter((m) => m.kind === 'compaction');
  check(name, `one g.mark[data-kind=compaction] per compaction (${expect.compactions})`,
    compactionMarks.length === expect.compactions, `${compactionMarks.length} marks`);
  check(name, `one g.mark[data-kind=undo] per undone compaction (${expect.undone})`,
    chartData.marks.filter((m) => m.kind === 'undo').length === expect.undone);
  const pointTurns = new Set(chartData.turns);
  const offPoint = chartData.marks.filter((m) => !pointTurns.has(m.turn));
  check(name, 'every mark\'s data-turn is a turn with a point', offPoint.length === 0,
    offPoint.map((m) => `${m.commit}@${m.turn}`).join(' '));
  check(name, 'every compaction mark names its commit (compaction:N)',
    compactionMarks.every((m) => /^compaction:\d+$/.test(m.commit || '')) &&
    new Set(compactionMarks.map((m) => m.commit)).size === compactionMarks.length);
  check(name, 'line.limit for the hard limit and the trigger',
    chartData.limits.includes('hard-limit') && chartData.limits.includes('trigger'), chartData.limits.join(','));
  const sorted = [...chartData.marks].sort((a, b) => a.box[0] - b.box[0]);
  const overlaps = [];
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].box[0] < sorted[i - 1].box[1] - 0.5) overlaps.push(`${sorted[i - 1].commit}@${sorted[i - 1].turn}/${sorted[i].commit}@${sorted[i].turn}`);
  }
  if (overlaps.length) note(name, `overlapping marks at 1366 px: ${overlaps.slice(0, 5).join(' ')}${overlaps.length > 5 ? ' …' : ''}`);

  // The conversation, the folds.
  const conv = await page.evaluate(() => ({
    top: document.querySelectorAll('ol#conversation > li.msg').length,
    folds: document.querySelectorAll('ol#conversation > li.msg > details.fold').length,
    sections: document.querySelectorAll('section.checkpoint-sections').length,
  }));
  check(name, `one ol#conversation > li.msg per message sent now (${expect.active})`, conv.top === expect.active,
    `${conv.top}`);
  check(name, `one section.checkpoint-sections per checkpoint (${expect.compactions + expect.undone})`,
    conv.sections === expect.compactions + expect.undone, `${conv.sections}`);
  if (expect.compactions > 0) {
    check(name, 'a checkpoint sent now has a details.fold', conv.folds > 0);
    const fold = await page.$('ol#conversation > li.msg > details.fold');
    if (fold) await openFold(page, name, fold, 'the fold', expect.nested);
  }

  // The events and their filter.
  const eventTotal = Object.values(expect.events).reduce((a, b) => a + b, 0);
  const evs = await page.evaluate(() => ({
    events: document.querySelectorAll('li.event').length,
    filters: [...document.querySelectorAll('input.kind-filter')].map((i) => ({ id: i.id, kind: i.dataset.kind ?? null })),
  }));
  check(name, `one li.event per event of the session (${eventTotal})`, evs.events === eventTotal, `${evs.events}`);
  const kinds = Object.keys(expect.events);
  if (kinds.length > 1) {
    const kind = kinds.includes('compaction_completed') ? 'compaction_completed' : kinds[0];
    const input = evs.filters.find((f) => f.kind === kind);
    check(name, `an input.kind-filter for ${kind}`, !!input);
    if (input) {
      await page.click(`label[for="${input.id}"]`);
      const shown = await page.evaluate(() => [...document.querySelectorAll('li.event')].map((e) => ({
        kind: e.dataset.kind, visible: e.checkVisibility() })));
      const wrong = shown.filter((e) => e.visible !== (e.kind === kind));
      check(name, `clicking ${input.id}'s label shows only the ${kind} events (${expect.events[kind]}) and hides the other kinds`,
        wrong.length === 0 && shown.filter((e) => e.visible).length === expect.events[kind],
        `${wrong.length} li.event shown or hidden wrongly`);
      const section = await page.$('section#events');
      if (section) await shot(page, section, `${name}-events-wide.png`);
      await page.click('label[for="kind-0"]');
      const all = await page.evaluate(() => [...document.querySelectorAll('li.event')].every((e) => e.checkVisibility()));
      check(name, 'clicking "all" shows every event again', all);
    }
  } else if (eventTotal === 0) {
    check(name, 'no events given: no filter', evs.filters.length === 0);
  }

  // Hostile texts: shown as text, nothing injected.
  if (expect.hostile.length > 0) {
    const h = await page.evaluate((hostile) => {
      const text = document.body.textContent;
      const onAttrs = [];
      for (const e of document.querySelectorAll('*')) {
        for (const a of e.attributes) if (/^on/i.test(a.name)) onAttrs.push(`${e.tagName}[${a.name}]`);
      }
      return {
        missing: hostile.filter((s) => !text.includes(s)),
        injected: [...document.querySelectorAll('img, iframe, script, object, embed, #recap-injected')].map((e) => e.tagName),
        onAttrs: onAttrs.slice(0, 5),
        flag: typeof window.__recapInjected,
        styles: document.querySelectorAll('style').length,
        bodyChildren: [...document.body.children].map((e) => e.tagName.toLowerCase()).filter((t) => !['h1', 'h2', 'div', 'svg', 'p', 'ol', 'section'].includes(t)),
      };
    }, expect.hostile);
    check(name, `the ${expect.hostile.length} hostile texts are in the page as text`, h.missing.length === 0,
      `missing: ${JSON.stringify(h.missing)}`);
    check(name, 'no element injected (img, iframe, script, object, embed)', h.injected.length === 0, h.injected.join(','));
    check(name, 'no element has an on* attribute', h.onAttrs.length === 0, h.onAttrs.join(' '));
    check(name, 'window.__recapInjected is not set; one <style>', h.flag === 'undefined' && h.styles === 1,
      `${h.flag}, ${h.styles} style elements`);
    check(name, 'the body holds only the page\'s own blocks', h.bodyChildren.length === 0, h.bodyChildren.join(','));
  }
  await page.close();
  console.log(`  (${name}: ${((Date.now() - started) / 1000).toFixed(1)} s in the browser)`);
}

// Notes what sticks out sideways at this width, and how small the chart's text is drawn.
async function layoutNotes(page, name, width) {
  const l = await page.evaluate(() => {
    const cw = document.documentElement.clientWidth;
    const svg = document.querySelector('svg#chart');
    const label = (e) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}` +
      `${typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\s+/).join('.') : ''}`;
    // The outermost elements whose content runs past the body's right edge.
    const right = document.body.getBoundingClientRect().right;
    const wide = [];
    const walk = (e) => {
      for (const c of e.children) {
        if (c.scrollWidth > c.clientWidth + 1 && getComputedStyle(c).overflowX === 'visible' &&
            c.getBoundingClientRect().left + c.scrollWidth > right + 1) {
          const inner = wide.length;
          walk(c);
          if (wide.length === inner) wide.push(`${label(c)} (${c.scrollWidth} px)`);
        } else if (c.getBoundingClientRect().right > right + 1) {
          wide.push(`${label(c)} (${Math.round(c.getBoundingClientRect().width)} px)`);
        }
      }
    };
    walk(document.body);
    const uniq = [...new Set(wide.map((w) => w.replace(/ \(\d+ px\)/, '')))];
    return { scrollWidth: document.documentElement.scrollWidth, cw, wide: uniq, count: wide.length,
      widest: Math.max(0, ...wide.map((w) => Number(/(\d+) px/.exec(w)?.[1] || 0))),
      chartScale: svg ? svg.getBoundingClientRect().width / svg.viewBox.baseVal.width : 0 };
  });
  if (l.scrollWidth > l.cw) {
    note(name, `at ${width} px the page is ${l.scrollWidth} px wide (scrolls sideways); past the right edge: ` +
      `${l.count} elements, up to ${l.widest} px: ${l.wide.slice(0, 4).join(', ')}`);
  }
  if (l.chartScale && 11 * l.chartScale < 8) {
    note(name, `at ${width} px the chart is drawn at ${(l.chartScale * 100).toFixed(0)}% of its 960-wide viewBox: ` +
      `its 11 px labels are ${(11 * l.chartScale).toFixed(1)} px, its marks ${(12 * l.chartScale).toFixed(1)} px wide`);
  }
}

// Opens a details.fold by clicking its summary; its ol.originals must then be visible. With
// `nested`, opens the first checkpoint among the originals the same way.
async function openFold(page, name, fold, what, nested) {
  const before = await fold.evaluate((d) => ({ open: d.open, commit: d.dataset.commit,
    visible: d.querySelector(':scope > ol.originals')?.checkVisibility() ?? null,
    originals: d.querySelectorAll(':scope > ol.originals > li').length }));
  check(name, `${what} (${before.commit}) starts closed, its ol.originals hidden`, before.open === false && before.visible === false,
    JSON.stringify(before));
  const summary = await fold.$(':scope > summary');
  const t0 = Date.now();
  await summary.click();
  const after = await fold.evaluate((d) => {
    const ol = d.querySelector(':scope > ol.originals');
    const first = ol?.querySelector(':scope > li');
    return { open: d.open, visible: ol?.checkVisibility() ?? false, height: ol?.getBoundingClientRect().height ?? 0,
      first: first ? first.checkVisibility() && first.getBoundingClientRect().height > 0 : false };
  });
  check(name, `clicking its summary opens it: its ${before.originals} originals are visible (${Date.now() - t0} ms)`,
    after.open && after.visible && after.height > 0 && after.first, JSON.stringify(after));
  if (what === 'the fold') {
    await shot(page, fold, `${name}-fold-wide.png`);
  }
  if (nested) {
    const inner = await fold.$(':scope > ol.originals > li > details.fold');
    check(name, `${what} folds an earlier checkpoint (a nested details.fold)`, !!inner);
    if (inner) await openFold(page, name, inner, 'the nested fold', false);
  }
}

// The viewport scrolled to an element's top: quick, where an element's own screenshot of an
// opened fold of thousands of messages takes many seconds.
async function shot(page, el, file) {
  await el.evaluate((e) => e.scrollIntoView({ block: 'start' }));
  await page.screenshot({ path: path.join(opt.artifacts, file) });
  await page.evaluate(() => window.scrollTo(0, 0));
}
