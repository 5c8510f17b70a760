// browser.test.mjs: the approval inbox page in real headless Chromium
// against a real berthd: log in through the login URL, open the inbox,
// approve one job and decline another, answer a suspended job through the
// form generated from its resumeSchema, and see each reach its final
// status without a reload; the session reaches no other server on the
// host, a used login URL shows a page that says so, and logout ends the
// session. Screenshots of the inbox (desktop and phone) and of a job's
// detail go to $SCREENSHOTS. berthd dies with the test process, even when
// it dies before after() (child.mjs, which run-browser.sh copies from
// tests/harness).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

import { spawnTied } from './child.mjs';

const BERTHD = process.env.BERTHD;
const TOOLS = process.env.BERTH_HTTP_TOOLS;
const SHOTS = process.env.SCREENSHOTS || '.';
const TIMEOUT = 20000;

let dir, daemon, base, login, browser, page, other, otherUrl;
const log = [];
// What another server on this host (another port of 127.0.0.1) is sent.
const seenByOther = [];

async function rest(path, body) {
  const r = await fetch(base + path, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { Authorization: 'Bearer secret', 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const v = await r.json();
  if (!r.ok) throw new Error(`${path}: ${r.status} ${JSON.stringify(v)}`);
  return v;
}

const submit = async (tool, input) => (await rest('/api/jobs', { tool, input })).id;

// applied waits until the page has applied the event seq (#live's
// data-seq is the newest it has).
const applied = (seq) => page.waitForFunction(
  (s) => Number(document.querySelector('#live').dataset.seq) >= s, seq);

// approvedToTheEnd approves job id, waits for it to finish and for the
// page to apply its last event, and returns that event.
async function approvedToTheEnd(id) {
  await rest(`/api/jobs/${id}/approve`, {});
  await rest(`/api/jobs/${id}/wait?timeoutMs=15000`);
  const last = (await rest(`/api/jobs/${id}/events`)).events.at(-1);
  await applied(last.seq);
  return last;
}

// holdAnswers holds berthd's answers to the page's requests whose URL
// matches pattern: each is fetched from berthd at once but handed to the
// page only at release(), which resolves once all are handed and the
// route is gone. fetched resolves once the first answer is held.
async function holdAnswers(pattern) {
  let heldOne, open;
  const fetched = new Promise((resolve) => { heldOne = resolve; });
  const gate = new Promise((resolve) => { open = resolve; });
  const handed = [];
  await page.route(pattern, (route) => {
    const p = (async () => {
      const response = await route.fetch();
      heldOne();
      await gate;
      await route.fulfill({ response });
    })();
    handed.push(p);
    return p;
  });
  return {
    fetched,
    release: async () => {
      open();
      await Promise.all(handed);
      await page.unroute(pattern);
    },
  };
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-browser-'));
  writeFileSync(join(dir, 'token'), 'secret\n');
  daemon = spawnTied(BERTHD, ['--db', join(dir, 'db'), '--socket', join(dir, 'sock'),
    '--tools', TOOLS, '--http', '127.0.0.1:0', '--token-file', join(dir, 'token'), '--quiet'],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('berthd did not start: ' + log.join(''))), TIMEOUT);
    daemon.stderr.on('data', (d) => {
      log.push(String(d));
      const m = log.join('').match(/serving (http:\/\/[0-9.:]+)\/; log in at (\S+)/);
      if (m && !base) { base = m[1]; login = m[2]; clearTimeout(t); resolve(); }
    });
    daemon.on('exit', (code) => reject(new Error(`berthd exited ${code}: ${log.join('')}`)));
  });
  // A fresh --user-data-dir: playwright passes it from the first argument.
  browser = await chromium.launchPersistentContext(join(dir, 'chromium'), {
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1200, height: 900 },
  });
  other = createServer((q, res) => {
    seenByOther.push({ url: q.url, cookie: q.headers.cookie, authorization: q.headers.authorization });
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>another server</title><p>another server</p>');
  });
  await new Promise((resolve) => other.listen(0, '127.0.0.1', resolve));
  otherUrl = `http://127.0.0.1:${other.address().port}/`;
  page = browser.pages()[0] || await browser.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (e) => log.push('page error: ' + e.message + '\n'));
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  if (browser) await browser.close();
  if (other) other.close();
  if (daemon && daemon.exitCode === null) {
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.on('exit', r));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the inbox: approve, decline and resume through the page, live', async () => {
  const approveMe = await submit('deploy', { service: 'web' });
  const declineMe = await submit('deploy', { service: 'database' });
  const trip = await submit('book-trip', { destination: 'Oslo' });
  await rest(`/api/jobs/${trip}/wait?timeoutMs=15000&until=suspended`);

  // The login URL (its token in the fragment) opens a session for this
  // tab and lands on the inbox; the token is gone from the address bar.
  assert.match(login, /\/login#[0-9a-f]{64}$/);
  await page.goto(login);
  await page.waitForURL(base + '/');
  assert.equal(new URL(page.url()).pathname, '/');
  assert.equal(await page.evaluate(() => document.cookie), '');
  await page.evaluate(() => { window.notReloaded = true; });
  for (const id of [approveMe, declineMe, trip]) {
    await page.locator(`button.item[data-job="${id}"]`).waitFor();
  }
  await page.locator('#live', { hasText: 'live' }).waitFor();
  // Newest first.
  const order = await page.locator('button.item').evaluateAll((els) => els.map((e) => e.dataset.job));
  assert.deepEqual(order.slice(0, 3), [trip, declineMe, approveMe]);
  await page.screenshot({ path: join(SHOTS, 'inbox.png'), fullPage: true });

  // A job that arrives while the page is open shows up by itself, and the
  // row a keyboard user is on keeps the focus while the list changes
  // around it (the list was once rebuilt on every event, and the Enter
  // below then went to nothing).
  await page.focus(`button.item[data-job="${approveMe}"]`);
  const late = await submit('deploy', { service: 'late' });
  await page.locator(`button.item[data-job="${late}"]`).waitFor();
  await rest(`/api/jobs/${late}/wait?timeoutMs=15000&until=awaiting_approval`);
  const lateSeq = (await rest(`/api/jobs/${late}/events`)).events.at(-1).seq;
  await applied(lateSeq);
  assert.equal(await page.evaluate(() => document.activeElement.dataset.job), approveMe);

  // Approve, with the keyboard only.
  await page.keyboard.press('Enter');
  await page.locator('#approve').focus();
  await page.keyboard.press('Enter');
  await page.locator('#job-status', { hasText: 'completed' }).waitFor();

  // Decline with a reason.
  await page.click('#nav-inbox');
  await page.locator(`button.item[data-job="${approveMe}"]`).waitFor({ state: 'detached' });
  await page.click(`button.item[data-job="${declineMe}"]`);
  await page.fill('#reason', 'not on a Friday');
  await page.click('#decline');
  await page.locator('#job-status', { hasText: 'declined' }).waitFor();
  assert.equal((await rest(`/api/jobs/${declineMe}`)).approval.reason, 'not on a Friday');

  // Resume through the form generated from book-trip's resumeSchema.
  await page.click('#nav-inbox');
  await page.click(`button.item[data-job="${trip}"]`);
  await page.locator('#resume-form').waitFor();
  await page.getByLabel('Traveller').fill('Ann');
  await page.getByLabel('Seats').fill('2');
  await page.getByLabel('Budget').fill('1234.5');
  await page.getByLabel('VIP lounge').check();
  await page.getByLabel('Cabin').selectOption({ label: 'business' });
  await page.getByLabel('City').fill('Oslo');
  await page.getByLabel('ZIP').fill('12');
  await page.click('button:has-text("Add item")');
  await page.getByLabel('Item 1').fill('Bergen');
  await page.click('button:has-text("Add item")');
  await page.getByLabel('Item 2').fill('Trondheim');
  // The page checks the schema before the daemon does.
  await page.click('#resume');
  await page.locator('#resume-form [aria-invalid=true]').first().waitFor();
  await page.locator('.msg.error', { hasText: 'ZIP' }).waitFor();
  assert.equal((await rest(`/api/jobs/${trip}`)).status, 'suspended');
  await page.getByLabel('ZIP').fill('01234');
  await page.screenshot({ path: join(SHOTS, 'job-resume-form.png'), fullPage: true });
  await page.click('#resume');
  await page.locator('#job-status', { hasText: 'completed' }).waitFor();
  await page.screenshot({ path: join(SHOTS, 'job.png'), fullPage: true });
  const done = await rest(`/api/jobs/${trip}`);
  assert.deepEqual(done.output.details, {
    traveller: 'Ann', seats: 2, budget: 1234.5, vip: true, cabin: 'business',
    address: { city: 'Oslo', zip: '01234' }, stops: ['Bergen', 'Trondheim'],
  });

  // The inbox now holds only the late job, and nothing was reloaded.
  await page.click('#nav-inbox');
  await page.locator(`button.item[data-job="${trip}"]`).waitFor({ state: 'detached' });
  assert.equal(await page.locator('button.item').count(), 1);
  assert.equal(await page.evaluate(() => window.notReloaded), true);

  // The jobs browser with a filter.
  await page.click('#nav-jobs');
  await page.locator('#status-boxes input[value="declined"]').check();
  await page.click('#filters button[type=submit]');
  // The unfiltered rows stay until the filtered list has come: wait for
  // the table to show the one declined job, not for any row.
  await page.waitForFunction(
    () => document.querySelectorAll('#jobs-table tbody tr').length === 1,
    null, { timeout: 10000 }).catch(() => {});
  assert.equal(await page.locator('#jobs-table tbody tr').count(), 1);

  // On a phone.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.click('#nav-inbox');
  await page.screenshot({ path: join(SHOTS, 'inbox-phone.png'), fullPage: true });
  await page.setViewportSize({ width: 1200, height: 900 });
  assert.deepEqual(log.filter((l) => l.startsWith('page error')), []);
});

test('an answer about a job that comes after its newer events does not put the job back', async () => {
  await page.click('#nav-inbox');
  await page.locator('#live', { hasText: 'live' }).waitFor();
  // The page fetches a job that starts to wait. Hold berthd's answer
  // (which says "awaiting approval") until the job has been approved and
  // has finished, and the page has seen those events; then hand it over.
  const hold = await holdAnswers(/\/api\/jobs\/[^/?]+$/);
  const id = await submit('deploy', { service: 'stale' });
  await hold.fetched;
  assert.equal((await approvedToTheEnd(id)).type, 'completed');
  await hold.release();
  // Whatever the held answer did has happened once the page has applied
  // one more event: it came first.
  const marker = await submit('deploy', { service: 'marker' });
  await page.locator(`button.item[data-job="${marker}"]`).waitFor();
  assert.equal(await page.locator(`button.item[data-job="${id}"]`).count(), 0);
  await rest(`/api/jobs/${marker}/decline`, {});
  await page.locator(`button.item[data-job="${marker}"]`).waitFor({ state: 'detached' });
});

test('the inbox list a page reads as it opens does not undo the events that came while it was out', async () => {
  const id = await submit('deploy', { service: 'listed' });
  await rest(`/api/jobs/${id}/wait?timeoutMs=15000&until=awaiting_approval`);
  // Hold the list (which names the job as waiting) until the job has been
  // approved and has finished and the page has seen that.
  const hold = await holdAnswers(/\/api\/jobs\?status=/);
  await page.reload();
  await hold.fetched;
  await approvedToTheEnd(id);
  await hold.release();
  // The list has been applied once the inbox shows the other jobs it names.
  await page.locator('#inbox-count', { hasText: /^[1-9]/ }).waitFor();
  assert.equal(await page.locator(`button.item[data-job="${id}"]`).count(), 0);
  assert.equal((await rest(`/api/jobs/${id}`)).status, 'completed');
});

test('the session reaches no other server on the host, and logout ends it', async () => {
  const session = await page.evaluate(() => sessionStorage.getItem('berth.session'));
  assert.match(session, /^berth-session-[0-9a-f]{64}$/);
  // Another server on 127.0.0.1 (cookies would ignore its port) is sent
  // nothing of the session when the browser visits it.
  await page.goto(otherUrl + 'visit');
  await page.locator('text=another server').waitFor();
  assert.ok(seenByOther.length >= 1, JSON.stringify(seenByOther));
  for (const s of seenByOther) {
    assert.equal(s.cookie, undefined, 'a cookie reached another server: ' + s.cookie);
    assert.equal(s.authorization, undefined);
  }
  // Back on berth's page, the tab's session still works.
  await page.goto(base + '/');
  await page.locator('#live', { hasText: 'live' }).waitFor();
  assert.equal((await fetch(base + '/api/info', { headers: { Authorization: 'Bearer ' + session } })).status, 200);
  // Log out: the session ends on berthd too.
  await page.click('#logout');
  await page.locator('#banner', { hasText: 'Logged out' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('berth.session')), null);
  assert.equal((await fetch(base + '/api/info', { headers: { Authorization: 'Bearer ' + session } })).status, 401);
});

test('a used login URL shows a page that says so', async () => {
  await page.goto(login);
  await page.locator('#login-refused').waitFor();
  assert.match(await page.locator('#login-why').textContent(), /expired, was used already, or is wrong/);
  assert.equal(new URL(page.url()).hash, '');
  // The newest login URL berthd logged works.
  const urls = log.join('').match(/log in at (\S+)/g);
  const newest = urls[urls.length - 1].slice('log in at '.length);
  assert.notEqual(newest, login);
  await page.goto(newest);
  await page.waitForURL(base + '/');
  await page.locator('#live', { hasText: 'live' }).waitFor();
  assert.deepEqual(log.filter((l) => l.startsWith('page error')), []);
});

// openJob shows job id's detail, as a click in the inbox does.
async function openJob(id) {
  await page.evaluate((j) => { location.hash = '#/job/' + j; }, id);
  await page.locator(`#job[data-job="${id}"]`).waitFor();
}

test('an optional nested object left empty is left out of the resume data', async () => {
  await page.click('#nav-inbox');
  const id = await submit('book-seat', { destination: 'Rome' });
  await rest(`/api/jobs/${id}/wait?timeoutMs=15000&until=suspended`);
  await openJob(id);
  await page.locator('#resume-form').waitFor();
  await page.getByLabel('Name').fill('Ann');
  // Once one of its fields is filled, its required members are too.
  await page.getByLabel('Note for the courier').fill('ring twice');
  await page.click('#resume');
  await page.locator('.msg.error', { hasText: 'Street: required' }).waitFor();
  assert.equal((await rest(`/api/jobs/${id}`)).status, 'suspended');
  // All of them empty: the object is left out, as its "(optional)" says.
  await page.getByLabel('Note for the courier').fill('');
  await page.click('#resume');
  await page.locator('#job-status', { hasText: 'completed' }).waitFor();
  assert.deepEqual((await rest(`/api/jobs/${id}`)).output.details, { name: 'Ann' });
});

test('the detail follows every change of its job, and its buttons work again after an action', async () => {
  // An approval below the quorum changes no status: the detail shows it
  // all the same, whether it was given here or elsewhere.
  const mine = await submit('deploy-twice', { service: 'api' });
  await rest(`/api/jobs/${mine}/wait?timeoutMs=15000&until=awaiting_approval`);
  await openJob(mine);
  await page.locator('#job-approvals', { hasText: /^0 of 2/ }).waitFor();
  await page.click('#approve');
  await page.locator('#job-approvals', { hasText: /^1 of 2: root/ }).waitFor();
  await page.locator('.timeline .badge', { hasText: 'approved' }).waitFor();
  for (const b of ['#approve', '#decline', '#cancel']) assert.equal(await page.isDisabled(b), false, b);

  const theirs = await submit('deploy-twice', { service: 'db' });
  await rest(`/api/jobs/${theirs}/wait?timeoutMs=15000&until=awaiting_approval`);
  await openJob(theirs);
  await page.locator('#job-approvals', { hasText: /^0 of 2/ }).waitFor();
  await rest(`/api/jobs/${theirs}/approve`, {});
  await page.locator('#job-approvals', { hasText: /^1 of 2: token/ }).waitFor();
  await page.locator('.timeline .badge', { hasText: 'approved' }).waitFor();
  await page.click('#approve');
  await page.locator('#job-status', { hasText: 'completed' }).waitFor();

  // The first job can still be cancelled from its detail.
  await openJob(mine);
  await page.locator('#job-approvals', { hasText: /^1 of 2/ }).waitFor();
  await page.click('#cancel');
  await page.locator('#job-status', { hasText: 'cancelled' }).waitFor();
});

test('the detail of a running job shows its progress as it goes', async () => {
  const id = await submit('count', { to: 8, delayMs: 500 });
  await openJob(id);
  await page.waitForFunction(() => {
    const p = document.querySelector('#job progress');
    return p && Number(p.value) >= 3 && document.querySelector('#job-status').textContent === 'running';
  }, null, { timeout: 10000 });
  await page.waitForFunction(() => Number(document.querySelector('#job progress').value) >= 5);
  await page.locator('#job-status', { hasText: 'completed' }).waitFor();
});

test("the chart's text says how many jobs completed in the last whole second", async () => {
  let busy = true;
  const load = (async () => {
    while (busy) {
      await Promise.all([1, 2, 3, 4].map((i) => submit('echo', { i })));
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  try {
    await page.waitForFunction(
      () => /^Last second: [1-9][0-9]* completed/.test(document.querySelector('#chart').getAttribute('aria-label')),
      null, { timeout: 10000 });
  } finally {
    busy = false;
    await load;
  }
});

// Last: it ends the tab's session.
test('a session berthd does not know (it restarted) sends the page to log in again', async () => {
  await page.evaluate(() => sessionStorage.setItem('berth.session', 'berth-session-' + 'ab'.repeat(32)));
  await page.goto(base + '/');
  await page.locator('#banner', { hasText: 'session ended' }).waitFor();
  assert.match(await page.locator('#banner').textContent(), /log in again|login URL/);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('berth.session')), null);
  assert.equal(await page.locator('#live').textContent(), 'offline');
  assert.deepEqual(log.filter((l) => l.startsWith('page error')), []);
});
