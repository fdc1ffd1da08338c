// Measures the dashboard at fleet scale in headless Chromium (prints figures,
// asserts nothing about time):
//   node tests/dashboard/scale.mjs [--nodes 12500] [--gpus 8] [--jobs 2000] [--rounds 10]
// with TESSERA_BIN set (default build/release/src/main/tessera).
//
// A real `tessera server` (scheduler on) gets NODES nodes of GPUS GPUs through
// POST /api/v1/batch (32 nodes per rack, 32 racks per block, every fourth rack
// NVLink pairs instead of NVSwitch) and JOBS 8-GPU training jobs that the
// scheduler places. Then: time from navigation to the first full render; the
// /api/v1/fleet snapshot's size and fetch time; and for live updates, rounds of
// node status writes (1 node, then 200 nodes per round) timed from the last
// write's acknowledgement until the page has drawn that revision, with the
// page's own apply and repaint times.
import { execSync } from 'node:child_process';
import path from 'node:path';
import { Cluster, requireTools, sleep } from './cluster.mjs';

const arg = (name, def) => {
  const i = process.argv.indexOf('--' + name);
  return i > 0 ? +process.argv[i + 1] : def;
};
const NODES = arg('nodes', 12500), GPUS = arg('gpus', 8), JOBS = arg('jobs', 2000);
const ROUNDS = arg('rounds', 10);
if (!process.env.TESSERA_BIN) {
  process.env.TESSERA_BIN = path.resolve(path.dirname(new URL(import.meta.url).pathname),
    '../../build/release/src/main/tessera');
}
const { bin, chromium: chromiumPath } = requireTools();
const { chromium } = await import('playwright-core');
const load = () => execSync('cat /proc/loadavg').toString().split(' ').slice(0, 3).join(' ');
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))];
};

const cluster = new Cluster(bin);
let browser;
try {
  await cluster.startServer([], ['--node-grace-seconds', '0']);
  const t0 = Date.now();
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const node = (i) => ({
    apiVersion: 'tessera.dev/v1', kind: 'Node',
    metadata: { name: `n${String(i).padStart(5, '0')}` },
    spec: { gpuType: 'NVIDIA H100 80GB HBM3', gpuCount: GPUS,
      layout: Math.floor(i / 32) % 4 === 3 ? 'nvlink-pairs' : 'nvswitch',
      rack: `r${Math.floor(i / 32)}`, block: `b${Math.floor(i / 1024)}` },
    status: { phase: 'Ready', lastHeartbeatTime: now },
  });
  for (let i = 0; i < NODES; i += 500) {
    const items = [];
    for (let k = i; k < Math.min(NODES, i + 500); k++) items.push(node(k));
    await cluster.api('POST', '/api/v1/batch', { items });
  }
  const seedNodesS = (Date.now() - t0) / 1000;
  for (let i = 0; i < JOBS; i += 200) {
    const items = [];
    for (let k = i; k < Math.min(JOBS, i + 200); k++) {
      items.push({ apiVersion: 'tessera.dev/v1', kind: 'TrainingJob',
        metadata: { name: `job-${k}`, namespace: `team-${k % 4}` },
        spec: { queue: `q${k % 8}`, command: ['/bin/true'],
          groups: [{ name: 'w', count: 1, gpusPerReplica: 8 }] } });
    }
    await cluster.api('POST', '/api/v1/batch', { items });
  }
  let placed = 0;
  await cluster.waitFor('jobs placed', async () => {
    const f = await cluster.api('GET', '/api/v1/fleet');
    placed = f.jobs.filter((j) => j[7].length).length;
    return placed >= JOBS * 0.95;
  }, 180000).catch((e) => console.error('note:', e.message));

  // The snapshot the page loads first.
  const f0 = performance.now();
  const snapRes = await fetch(cluster.url + '/api/v1/fleet',
    { headers: { Authorization: 'Bearer ' + cluster.adminToken } });
  const snapText = await snapRes.text();
  const snapMs = performance.now() - f0;

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  await page.addInitScript((t) => sessionStorage.setItem('tessera.token', t), cluster.adminToken);
  await page.goto(cluster.url + '/ui/');
  await page.waitForFunction((n) => +document.getElementById('summary').dataset.gpus === n,
    NODES * GPUS, { timeout: 120000, polling: 100 });
  const first = await page.evaluate(() => window.tessera.stats);
  // Where the first snapshot's time went (Resource Timing, ms since navigation).
  const timing = await page.evaluate(() => {
    const e = performance.getEntriesByType('resource').find((r) => /\/api\/v1\/fleet$/.test(r.name));
    const nav = performance.getEntriesByType('navigation')[0];
    return e && { pageLoaded: Math.round(nav.loadEventEnd), requestStart: Math.round(e.requestStart),
      responseStart: Math.round(e.responseStart), responseEnd: Math.round(e.responseEnd),
      bytes: e.encodedBodySize };
  });
  const canvas = await page.evaluate(() => {
    const c = document.getElementById('fleet');
    return `${c.width}x${c.height}`;
  });
  await page.screenshot({ path: path.join(cluster.dir, 'scale.png') });

  // Live updates: write node statuses, wait until the page has drawn them.
  const names = Array.from({ length: NODES }, (_, i) => `n${String(i).padStart(5, '0')}`);
  async function round(count, r) {
    const picked = [];
    for (let k = 0; k < count; k++) picked.push(names[(r * 7919 + k * 104729) % NODES]);
    let rv = 0;
    await Promise.all(picked.map(async (name) => {
      const obj = await cluster.api('GET', `/api/v1/nodes/${name}`);
      obj.status.gpus = [{ index: r % GPUS, health: r % 2 ? 'Healthy' : 'Unhealthy', message: 'scale test' }];
      delete obj.metadata.resourceVersion;
      const out = await cluster.api('PUT', `/api/v1/nodes/${name}`, obj);
      rv = Math.max(rv, +out.metadata.resourceVersion);
    }));
    const w0 = performance.now();
    await page.waitForFunction((v) => +document.body.dataset.rv >= v, rv, { polling: 'raf', timeout: 30000 });
    const latency = performance.now() - w0;
    const s = await page.evaluate(() => window.tessera.stats);
    return { latency, apply: s.lastApplyMs, render: s.lastRender.ms, painted: s.lastRender.nodes };
  }
  const results = {};
  for (const count of [1, 200]) {
    const rs = [];
    for (let r = 0; r < ROUNDS; r++) rs.push(await round(count, r));
    const f = (k) => `p50 ${pct(rs.map((x) => x[k]), 50).toFixed(1)} ms, max ${Math.max(...rs.map((x) => x[k])).toFixed(1)} ms`;
    results[count] = { latency: f('latency'), apply: f('apply'), render: f('render') };
  }
  const figures = {
    fleet: { nodes: NODES, gpus: NODES * GPUS, jobs: JOBS, jobsPlaced: placed, canvas },
    seedNodesSeconds: seedNodesS,
    snapshot: { bytes: snapText.length, fetchAndReadMs: Math.round(snapMs) },
    firstFullRenderMs: Math.round(first.firstRenderMs),
    firstFetchMs: Math.round(first.fullFetchMs),
    firstRenderPaintMs: Math.round(first.lastRender ? first.lastRender.ms : -1),
    firstSnapshotTiming: timing,
    liveUpdate1Node: results[1],
    liveUpdate200Nodes: results[200],
    loadAverage: load(),
  };
  console.log(JSON.stringify(figures, null, 2));
  console.log('screenshot', path.join(cluster.dir, 'scale.png'));
} finally {
  if (browser) await browser.close();
  await cluster.stop();
}
