// The web dashboard in a real browser (Debian's chromium, driven by Playwright):
// a real `tessera server` with tokens, two agents with fake GPUs (8 x H100 on
// NVSwitch, 4 x A100 PCIe). Asserts on what the page shows:
//   1. without a token the page asks for one; with it, 12 GPU cells are drawn
//      (canvas pixels read back at each cell), none for GPUs that do not exist,
//      colored by the utilization the agents measured (0 %; one GPU turns 70 %
//      busy, shown live from the heartbeats although the Node is not
//      rewritten) and, in allocation mode, free;
//   2. a submitted job's placement appears in the jobs table (as the API
//      reports it) and its GPUs turn "allocated" on the canvas;
//   3. an XID injected through the agent's fake backend turns that GPU's cell
//      red in health mode, and the node detail (opened by clicking the cell)
//      says Unhealthy;
//   4. an autoscaled InferenceService (spec.slo) shows its replicas bound of desired
//      ("2/4 replicas (min 2, max 4)") and its mean p99 against the target, both
//      updated live when status.desiredReplicas and status.replicaMetrics change
//      (written through the API as the controller and agents would; the service
//      asks for a GPU type no node has, so the controller leaves it unplaced and its
//      autoscaler, which acts on bound services only, does not write over them), the
//      p99 red when over target; a Cluster object (a federation member) in the
//      member clusters panel, its phase change shown live.
// Screenshots go to $ARTIFACT_DIR (the build dir). Exits non-zero on any failure;
// a missing chromium or node_modules is a failure, not a skip.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Cluster, requireTools, sleep } from './cluster.mjs';

const { bin, chromium: chromiumPath } = requireTools();
const { chromium } = await import('playwright-core');
const source = process.env.TESSERA_SOURCE_DIR ||
  path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const artifacts = process.env.ARTIFACT_DIR || path.join(process.cwd(), 'dashboard-artifacts');
fs.mkdirSync(artifacts, { recursive: true });

const cluster = new Cluster(bin);
let browser;
let page;
let failed = false;

async function shot(name) {
  if (!page) return;
  const file = path.join(artifacts, name + '.png');
  await page.screenshot({ path: file, fullPage: true });
  console.log('screenshot', file);
}

// The RGBA pixel at the center of GPU `gpu` of `node`, read back from the canvas.
async function pixel(node, gpu) {
  return page.evaluate(([n, g]) => {
    const c = window.tessera.cellAt(n, g);
    if (!c) return null;
    const ctx = document.getElementById('fleet').getContext('2d');
    const d = ctx.getImageData(c.x + Math.floor(c.w / 2), c.y + Math.floor(c.h / 2), 1, 1).data;
    return '#' + [d[0], d[1], d[2]].map((v) => v.toString(16).padStart(2, '0')).join('');
  }, [node, gpu]);
}

async function waitPixel(node, gpu, color, what, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  let got;
  while (Date.now() < end) {
    got = await pixel(node, gpu);
    if (got === color) return;
    await sleep(200);
  }
  throw new Error(`${what}: GPU ${gpu} of ${node} is drawn ${got}, expected ${color}`);
}

try {
  const h100 = 'h100-0';
  const pcie = 'pcie-0';
  await cluster.startServer([h100, pcie], ['--node-grace-seconds', '10', '--eviction-seconds', '600']);
  cluster.startAgent(h100, path.join(source, 'deploy/fake-gpus/up-h100-nvswitch-8.yaml'), 'rack-0');
  // The PCIe node's GPU 2 starts measuring 70 % busy 8 s after its agent starts. Its agent
  // heartbeats every second, but the server writes the Node only on a health change or once a
  // minute: the page must show the sample live (GpuSamples), not when the Node is next written.
  const pcieConfig = path.join(cluster.dir, 'pcie-4-busy.yaml');
  fs.writeFileSync(pcieConfig, fs.readFileSync(path.join(source, 'deploy/fake-gpus/up-pcie-4.yaml'),
    'utf8') + 'events:\n  - {at: 8s, gpu: 2, type: metrics, set: {gpu_util: 70}}\n');
  cluster.startAgent(pcie, pcieConfig, 'rack-pcie');
  await cluster.waitFor('both nodes Ready', async () => {
    const list = await cluster.api('GET', '/api/v1/nodes');
    return list.items.filter((n) => n.status && n.status.phase === 'Ready').length === 2;
  });
  console.log('cluster up at', cluster.url, 'data in', cluster.dir);

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const consoleErrors = [];
  // The login steps answer 401 by design; any other error in the page fails the test.
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 401/.test(m.text())) consoleErrors.push(m.text());
  });
  page.on('response', (r) => { if (r.status() === 404) consoleErrors.push('404 ' + r.url()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));

  // 1. The page asks for the token, then draws every GPU.
  await page.goto(cluster.url + '/');
  assert.match(page.url(), /\/ui\/$/, 'the root redirects to the dashboard');
  await page.locator('#login').waitFor({ state: 'visible', timeout: 10000 });
  await shot('1-login');
  await page.fill('#token', 'wrong-token');
  await page.click('#login button[type=submit]');
  await page.waitForFunction(() => /not accepted/.test(document.getElementById('login-why').textContent));
  await page.fill('#token', cluster.adminToken);
  await page.click('#login button[type=submit]');
  await page.waitForSelector('#summary[data-gpus="12"]', { timeout: 30000 });
  assert.equal(await page.getAttribute('#summary', 'data-nodes'), '2');
  assert.equal(await page.isVisible('#login'), false, 'the token form is gone after sign-in');
  assert.equal(await page.isVisible('#fleet'), true, 'the fleet canvas is shown');
  assert.equal(await page.getAttribute('#summary', 'data-unhealthy'), '0');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('tessera.token')), cluster.adminToken,
    'the token is kept for the tab');
  assert.equal(await page.$eval('#mode', (e) => e.value), 'util',
    'the agents report utilization: the page colours by it');
  const colors = await page.evaluate(() => window.tessera.colors);
  const utilColors = await page.evaluate(() => window.tessera.utilColors);
  assert.notEqual(utilColors[0], colors.noData, 'measured 0 % differs from "not reported"');
  const cells = new Set();
  // The default mode is measured utilization: the fake GPUs report 0 % with every heartbeat
  // (deploy/fake-gpus/up-*.yaml, gpu_util: 0), which the fleet summary carries to the page.
  for (const [node, n] of [[h100, 8], [pcie, 4]]) {
    for (let g = 0; g < n; g++) {
      if (node === pcie && g === 2) continue;  // busy from 8 s on, below
      await waitPixel(node, g, utilColors[0], 'measured utilization 0 %');
    }
  }
  // Within a few heartbeats of the change (the Node is not rewritten for a minute).
  await waitPixel(pcie, 2, utilColors[7], 'live utilization 70 %', 15000);
  await page.selectOption('#mode', 'alloc');
  for (const [node, n] of [[h100, 8], [pcie, 4]]) {
    for (let g = 0; g < n; g++) {
      const c = await page.evaluate(([a, b]) => window.tessera.cellAt(a, b), [node, g]);
      assert.ok(c, `a cell for GPU ${g} of ${node}`);
      cells.add(`${c.x},${c.y}`);
      await waitPixel(node, g, colors.free, 'unallocated GPU in allocation mode');
    }
    assert.equal(await page.evaluate(([a, b]) => window.tessera.cellAt(a, b), [node, n]), null,
      `no cell beyond the ${n} GPUs of ${node}`);
  }
  assert.equal(cells.size, 12, 'twelve distinct cells');
  // Node names are drawn left of their rows at this size: ink in the label's box.
  for (const name of [h100, pcie]) {
    const ink = await page.evaluate((n) => {
      const r = window.tessera.labelAt(n);
      if (!r) return -1;
      const d = document.getElementById('fleet').getContext('2d')
        .getImageData(r.x, r.y, r.w, r.h).data;
      const colours = new Set();
      for (let i = 0; i < d.length; i += 4) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return colours.size;
    }, name);
    assert.ok(ink > 2, `${name}'s name is drawn beside its GPUs (${ink} colours in its box)`);
  }
  // NVLink domains: the NVSwitch node is one; the PCIe node has two NVLink-bridged pairs.
  const domains = await page.evaluate(() => [...window.tessera.model.nodes.values()]
    .map((n) => n.name + ':' + new Set(n.domains).size).sort().join(' '));
  assert.equal(domains, 'h100-0:1 pcie-0:2');
  await shot('2-fleet');

  // 2. A job's placement appears after it is submitted.
  const jobName = 'dash-train';
  await cluster.api('POST', '/api/v1/namespaces/demo/trainingjobs', {
    apiVersion: 'tessera.dev/v1', kind: 'TrainingJob',
    metadata: { name: jobName, namespace: 'demo' },
    spec: { queue: 'research', command: ['/bin/sh', '-c', 'sleep 120'],
      groups: [{ name: 'worker', count: 1, gpusPerReplica: 4, gpuType: 'NVIDIA H100 80GB HBM3' }] },
  });
  const placed = await cluster.waitFor('the job placed', async () => {
    const j = await cluster.api('GET', `/api/v1/namespaces/demo/trainingjobs/${jobName}`);
    return j.status && j.status.placement && j.status.placement.length ? j.status.placement : null;
  }, 30000);
  const gpus = placed[0].gpus.slice().sort((a, b) => a - b);
  assert.equal(placed[0].node, h100);
  assert.equal(gpus.length, 4);
  const row = page.locator(`#jobs tr[data-job="demo/${jobName}"]`);
  await row.waitFor({ timeout: 30000 });
  // The page's notation: GPU index runs collapsed, e.g. h100-0[0-3] or h100-0[0-1,4-5].
  const runs = [];
  for (let i = 0; i < gpus.length;) {
    let j = i;
    while (j + 1 < gpus.length && gpus[j + 1] === gpus[j] + 1) j++;
    runs.push(i === j ? String(gpus[i]) : `${gpus[i]}-${gpus[j]}`);
    i = j + 1;
  }
  const expected = `${h100}[${runs.join(',')}]`;
  await page.waitForFunction(([sel, text]) => {
    const r = document.querySelector(sel);
    return r && r.lastElementChild.textContent === text;
  }, [`#jobs tr[data-job="demo/${jobName}"]`, expected], { timeout: 30000 });
  const jobCells = await row.locator('td').allTextContents();
  assert.match(jobCells[2], /^(—|[A-Za-z]+)$/, 'the reason is one bounded word, not the prose');
  assert.match(jobCells[5], /^\d+s$/, 'its age, as kubectl writes it');
  for (const g of gpus) await waitPixel(h100, g, colors.full, 'allocated GPU');
  const free = [0, 1, 2, 3, 4, 5, 6, 7].filter((g) => !gpus.includes(g));
  for (const g of free) assert.equal(await pixel(h100, g), colors.free, `GPU ${g} stays free`);
  const queueRow = page.locator('#queues tr[data-queue="research"] td');
  assert.equal(await queueRow.nth(3).textContent(), '4', 'the queue uses 4 GPUs');
  assert.equal(await queueRow.nth(6).textContent(), '0', 'nothing of it waits');
  assert.equal(await queueRow.nth(7).textContent(), '—', 'so no wait to show');
  // A gang that cannot be placed (two 8-GPU H100 members, one H100 node) waits: the queue's
  // pending count and its longest wait show it.
  await cluster.api('POST', '/api/v1/namespaces/demo/trainingjobs', {
    apiVersion: 'tessera.dev/v1', kind: 'TrainingJob',
    metadata: { name: 'dash-wait', namespace: 'demo' },
    spec: { queue: 'research', command: ['/bin/sh', '-c', 'sleep 60'],
      groups: [{ name: 'worker', count: 2, gpusPerReplica: 8, gpuType: 'NVIDIA H100 80GB HBM3' }] },
  });
  await page.waitForFunction(() => {
    const c = document.querySelectorAll('#queues tr[data-queue="research"] td');
    return c.length === 8 && c[6].textContent === '1' && /^\d+s$/.test(c[7].textContent);
  }, null, { timeout: 30000 });
  await cluster.api('DELETE', '/api/v1/namespaces/demo/trainingjobs/dash-wait');
  await shot('3-job-placed');

  // 3. An XID on a free GPU (so the job stays put) turns it unhealthy.
  const bad = free[free.length - 1];
  const node = await cluster.api('GET', `/api/v1/nodes/${h100}`);
  const endpoint = node.metadata.annotations['tessera.dev/agent-endpoint'];
  assert.ok(endpoint, 'the agent publishes its endpoint');
  const inj = await fetch(`${endpoint}/fake/event?gpu=${bad}&type=xid&xid=79`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${cluster.adminToken}` },
  });
  assert.ok(inj.ok, 'XID injected: ' + inj.status);
  await page.selectOption('#mode', 'health');
  await waitPixel(h100, bad, colors.unhealthy, 'GPU after XID 79');
  for (const g of [0, 1, 2, 3, 4, 5, 6, 7].filter((x) => x !== bad)) {
    assert.equal(await pixel(h100, g), colors.healthy, `GPU ${g} stays healthy`);
  }
  await page.waitForSelector('#summary[data-unhealthy="1"]');
  // Node detail: click the unhealthy cell.
  const c = await page.evaluate(([a, b]) => window.tessera.cellAt(a, b), [h100, bad]);
  await page.locator('#fleet').click({ position: { x: c.x + c.w / 2, y: c.y + c.h / 2 } });
  await page.waitForSelector(`#node-detail[data-node="${h100}"]`, { state: 'visible' });
  assert.equal(await page.getAttribute(`#node-gpus tr[data-gpu="${bad}"]`, 'data-health'), 'Unhealthy');
  await page.waitForFunction((g) => /XID|79/i.test(
    document.querySelector(`#node-gpus tr[data-gpu="${g}"]`).textContent), bad, { timeout: 10000 })
    .catch(() => console.log('note: the agent reported no message for the XID'));
  for (const g of gpus) {
    assert.match(await page.textContent(`#node-gpus tr[data-gpu="${g}"]`), new RegExp(`demo/${jobName}`));
  }
  // Each GPU's utilization over the last hour, a point per minute with heartbeats.
  await page.waitForFunction(() => {
    const s = document.querySelector('#node-gpus tr[data-gpu="0"] svg.spark');
    return s && Number(s.dataset.points) >= 1;
  }, null, { timeout: 15000 });
  assert.equal(await page.locator('#node-gpus svg.spark').count(), 8, 'a sparkline per GPU');
  await shot('4-xid-unhealthy');

  // 4. An autoscaled service and a member cluster. The service really runs: its replicas write
  // the p99 the test puts in a file to TESSERA_METRICS_PATH, their agents report it, and the
  // controller's autoscaler sets the desired count (status is the control plane's: the test
  // cannot write it).
  const svc = '/api/v1/namespaces/demo/inferenceservices/chat';
  const p99File = path.join(cluster.dir, 'p99');
  fs.writeFileSync(p99File, '180');
  const replica = 'while true; do p=$(cat ' + p99File + '); ' +
    'printf \'{"p99LatencyMs": %s, "rps": 40}\' "$p" > "$TESSERA_METRICS_PATH.tmp" && ' +
    'mv "$TESSERA_METRICS_PATH.tmp" "$TESSERA_METRICS_PATH"; sleep 1; done';
  await cluster.api('POST', '/api/v1/namespaces/demo/inferenceservices', {
    apiVersion: 'tessera.dev/v1', kind: 'InferenceService',
    metadata: { name: 'chat', namespace: 'demo',
      annotations: { 'tessera.dev/command': JSON.stringify(['/bin/sh', '-c', replica]),
        'tessera.dev/grace-seconds': '1' } },
    spec: { modelVersion: 'llama', queue: 'research', replicas: { min: 2, max: 4 }, gpusPerReplica: 1,
      slo: { p99LatencyMs: 250, minThroughputRps: 10 } },
  });
  // Admins may write a Cluster's status (the federation hub's, when one runs).
  async function writeStatus(p, change) {
    await cluster.waitFor(`status of ${p} written`, async () => {
      const obj = await cluster.api('GET', p);
      obj.status = { ...(obj.status || {}), ...change };
      await cluster.api('PUT', p + '/status', obj);
      return true;
    }, 15000);
  }
  const svcText = (sel) => page.evaluate((q) => {
    const e = document.querySelector('#jobs tr[data-job="demo/chat"] ' + q);
    return e ? { text: e.textContent, cls: e.className } : null;
  }, sel);
  const waitSvc = async (sel, text, what, timeout = 15000) => {
    await page.waitForFunction(([q, t]) => {
      const e = document.querySelector('#jobs tr[data-job="demo/chat"] ' + q);
      return e && e.textContent === t;
    }, [sel, text], { timeout }).catch(async () => {
      throw new Error(`${what}: ${JSON.stringify(await svcText(sel))}, expected "${text}"`);
    });
  };
  await waitSvc('.scale', '2/2 replicas (min 2, max 4)', 'replicas bound of desired', 60000);
  await waitSvc('.p99', 'p99 180 ms / 250 ms', 'mean p99 of the fresh readings vs target', 60000);
  assert.equal((await svcText('.p99')).cls, 'p99', 'under target: not marked over');
  // The replicas now answer over target: the autoscaler grows the service to its maximum.
  fs.writeFileSync(p99File, '310');
  await waitSvc('.p99', 'p99 310 ms / 250 ms', 'p99 updated live', 60000);
  assert.equal((await svcText('.p99')).cls, 'p99 over', 'over target: marked');
  await waitSvc('.scale', '4/4 replicas (min 2, max 4)', 'desired count updated live', 90000);
  const overColor = await page.evaluate(() =>
    getComputedStyle(document.querySelector('#jobs tr[data-job="demo/chat"] .p99')).color);
  assert.equal(overColor, 'rgb(255, 107, 107)', 'over target is drawn red');

  assert.equal(await page.isVisible('#clusters-section'), false, 'no clusters panel without Cluster objects');
  await cluster.api('POST', '/api/v1/clusters', {
    apiVersion: 'tessera.dev/v1', kind: 'Cluster', metadata: { name: 'east' },
    spec: { server: 'http://127.0.0.1:9' },
  });
  await writeStatus('/api/v1/clusters/east', { phase: 'Ready', gpus: 64, freeGpus: 24,
    message: '24 of 64 GPUs free' });
  await page.waitForFunction(() => {
    const r = document.querySelector('#clusters tr[data-cluster="east"]');
    return r && [...r.cells].map((c) => c.textContent).join('|') === 'east|Ready|64|24|24 of 64 GPUs free';
  }, null, { timeout: 15000 });
  assert.equal(await page.isVisible('#clusters-section'), true, 'the clusters panel is shown');
  await writeStatus('/api/v1/clusters/east', { phase: 'Unreachable', freeGpus: 0, message: 'not answering' });
  await page.waitForSelector('#clusters tr[data-cluster="east"][data-phase="Unreachable"]', { timeout: 15000 });
  await shot('5-isvc-clusters');
  await cluster.api('DELETE', '/api/v1/clusters/east');
  await page.waitForSelector('#clusters-section', { state: 'hidden', timeout: 15000 });
  await cluster.api('DELETE', svc);

  // 5. A failed job shows its bounded reason and exit code; the prose is a hover away.
  await cluster.api('POST', '/api/v1/namespaces/demo/trainingjobs', {
    apiVersion: 'tessera.dev/v1', kind: 'TrainingJob',
    metadata: { name: 'dash-fail', namespace: 'demo' },
    spec: { queue: 'research', command: ['/bin/sh', '-c', 'echo bad input >&2; exit 3'],
      groups: [{ name: 'worker', count: 1, gpusPerReplica: 1 }] },
  });
  const failRow = '#jobs tr[data-job="demo/dash-fail"]';
  await page.waitForSelector(failRow + '[data-phase="Failed"]', { timeout: 60000 });
  const failCells = await page.locator(failRow + ' td').allTextContents();
  assert.match(failCells[2], /\(exit 3\)$/, 'the exit code: ' + failCells.join('|'));
  assert.match(await page.getAttribute(failRow + ' td.reason', 'title'), /failed|exit|code 3/i);
  await shot('6-failed-job');
  await cluster.api('DELETE', '/api/v1/namespaces/demo/trainingjobs/dash-fail');

  // 6. Kiosk: a token in the URL fragment signs in, and leaves the address bar.
  const kiosk = await browser.newPage();
  await kiosk.goto(cluster.url + '/ui/#token=' + encodeURIComponent(cluster.adminToken));
  await kiosk.waitForSelector('#summary[data-gpus="12"]', { timeout: 30000 });
  assert.equal(await kiosk.isVisible('#login'), false, 'no token form in kiosk mode');
  assert.equal(await kiosk.evaluate(() => location.hash), '', 'the token left the URL');
  await kiosk.close();

  const stats = await page.evaluate(() => window.tessera.stats);
  console.log(`page: first render ${stats.firstRenderMs.toFixed(0)} ms after navigation, ` +
    `${stats.updates} live updates, last render ${stats.lastRenderMs.toFixed(1)} ms`);
  assert.ok(stats.updates >= 2, 'live updates arrived');
  assert.deepEqual(consoleErrors, [], 'no errors in the page');
  await cluster.api('DELETE', `/api/v1/namespaces/demo/trainingjobs/${jobName}`);
  await sleep(2000);
  console.log('PASS dashboard browser test');
} catch (e) {
  failed = true;
  console.error('FAIL:', e.stack || e);
  await shot('failure').catch(() => {});
  console.error('logs in', cluster.dir);
} finally {
  if (browser) await browser.close();
  await cluster.stop();
  if (!failed) fs.rmSync(cluster.dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
