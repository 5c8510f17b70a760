// berth's approval inbox: plain JavaScript, no build step, nothing fetched
// from anywhere but this berthd. Every string from a job or a tool reaches
// the page as text (h() below), never as HTML.
'use strict';

const STATUSES = ['pending', 'awaiting_approval', 'running', 'suspended',
  'completed', 'failed', 'timed_out', 'declined', 'cancelled', 'expired'];
const WAITING = new Set(['awaiting_approval', 'suspended']);
const TERMINAL = new Set(['completed', 'failed', 'timed_out', 'declined',
  'cancelled', 'expired']);

const $ = (sel) => document.querySelector(sel);
// latest: the newest event seq seen of each job whose onEvent may still
// be waiting for its fetch; loading: for each inbox list being read, the
// jobs with events since it was asked for.
const state = { tools: new Map(), inbox: new Map(), latest: new Map(), loading: new Set(),
  current: null, cursor: null, stream: null };

// h builds an element: h('button', {class: 'x', onclick: fn}, 'text', child).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

// who names who did something and how: "alice (http)", "bob (mcp,
// Claude 1.2)".
function who(name, via, client) {
  const how = [via, client && [client.name, client.version].filter(Boolean).join(' ')].filter(Boolean);
  return (name || 'unknown') + (how.length ? ' (' + how.join(', ') + ')' : '');
}

// approvalsText says how many approvals a job has of how many it needs,
// and whose they are.
function approvalsText(a) {
  const list = (a.approvals || []).map((x) => who(x.by, x.via) + ' ' + when(x.at)).join('; ');
  return (a.approvals || []).length + ' of ' + (a.quorum || 1) + (list ? ': ' + list : '');
}

function banner(text) {
  const b = $('#banner');
  b.textContent = text || '';
  b.hidden = !text;
}

// The session this tab opened on the login page (login.js). It lives in
// sessionStorage, which belongs to this origin alone, and goes out as a
// Bearer token: nothing about it is sent to another port or host, as a
// cookie would be.
const SESSION_KEY = 'berth.session';

function authHeaders() {
  const s = sessionStorage.getItem(SESSION_KEY);
  return s ? { Authorization: 'Bearer ' + s } : {};
}

// loggedOut leaves the page logged out, saying why: text, or else the
// message of berthd's 401 (error), or that no one is logged in.
function loggedOut(text, error) {
  sessionStorage.removeItem(SESSION_KEY);
  // A session ends when it is logged out or expires, and when berthd
  // restarts (sessions live in its memory): berthd then says so.
  const ended = error && /session ended/.test(error.message || '');
  banner(text || (ended
    ? 'Your session ended (berthd may have restarted): open the login URL that berthd logged (…/login#…) to log in again.'
    : 'Not logged in: open the login URL that berthd logged (…/login#…).'));
  $('#live').textContent = 'offline';
  $('#logout').hidden = true;
  if (state.stream) state.stream.abort();
}

// api calls a REST route; it throws an Error with .status and .error (the
// socket's {code, message, data}) on failure.
async function api(path, body, method) {
  const opt = { headers: authHeaders() };
  if (body !== undefined) {
    opt.method = method || 'POST';
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  } else if (method) {
    opt.method = method;
  }
  const r = await fetch(path, opt);
  const v = r.status === 204 ? {} : await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = new Error((v.error && v.error.message) || r.statusText);
    e.status = r.status;
    e.error = v.error;
    if (r.status === 401) loggedOut(null, v.error);
    throw e;
  }
  return v;
}

async function logout() {
  try { await api('/api/session', undefined, 'DELETE'); } catch (e) { /* ended anyway */ }
  loggedOut('Logged out. Open a new login URL from berthd\'s log to come back.');
}

async function loadTools() {
  let cursor = null;
  do {
    const page = await api('/api/tools' + (cursor ? '?cursor=' + encodeURIComponent(cursor) : ''));
    for (const t of page.tools) state.tools.set(t.name, t);
    cursor = page.nextCursor;
  } while (cursor);
  const sel = $('#f-tool');
  for (const name of [...state.tools.keys()].sort()) sel.append(h('option', { value: name }, name));
}

// ---- the inbox ----------------------------------------------------------

// renderInbox brings the list up to date in place. A job's row stays the
// same element while the job waits, so the keyboard focus on it (and a
// click half-way through) survives the events that change the list
// around it; only new rows are inserted and gone ones removed. Rebuilding
// the list on every event took the focus from under a keyboard user.
function renderInbox() {
  const list = $('#inbox');
  const jobs = [...state.inbox.values()].sort((a, b) => (a.id < b.id ? 1 : -1));
  const rows = new Map();
  for (const li of [...list.children]) {
    if (state.inbox.has(li.dataset.job)) rows.set(li.dataset.job, li); else li.remove();
  }
  let at = list.firstElementChild;
  for (const j of jobs) {
    const li = rows.get(j.id) || inboxRow(j);
    setRowStatus(li, j.status);
    if (li === at) at = at.nextElementSibling; else list.insertBefore(li, at);
  }
  $('#inbox-empty').hidden = jobs.length > 0;
  $('#inbox-count').textContent = String(jobs.length);
}

function inboxRow(j) {
  return h('li', { 'data-job': j.id },
    h('button', { class: 'item', type: 'button', 'data-job': j.id,
      onclick: () => { location.hash = '#/job/' + j.id; } },
      h('span', { class: 'tool' }, (state.tools.get(j.tool) || {}).title || j.tool),
      h('span', { class: 'badge' }),
      h('span', { class: 'meta' }, j.id + ' · ' + when(j.createdAt))));
}

function setRowStatus(li, status) {
  const button = li.firstElementChild;
  if (button.dataset.status === status) return;
  button.dataset.status = status;
  const badge = button.querySelector('.badge');
  badge.className = 'badge ' + status;
  badge.textContent = status === 'awaiting_approval' ? 'needs approval' : 'needs input';
}

// loadInbox reads the waiting jobs whole, as each stream starts. The
// events that come while the list is out are newer than it: a job one of
// them names is left as that event made it.
async function loadInbox() {
  const moved = new Set();
  state.loading.add(moved);
  let v;
  try {
    v = await api('/api/jobs?status=awaiting_approval,suspended&limit=1000');
  } finally {
    state.loading.delete(moved);
  }
  const listed = new Map(v.jobs.map((j) => [j.id, j]));
  for (const id of [...state.inbox.keys()]) {
    if (!listed.has(id) && !moved.has(id)) state.inbox.delete(id);
  }
  for (const [id, j] of listed) if (!moved.has(id)) state.inbox.set(id, j);
  renderInbox();
}

// ---- live events ----------------------------------------------------------

const chart = { sec: Math.floor(Date.now() / 1000), ok: new Array(60).fill(0), bad: new Array(60).fill(0) };

// chartAdvance moves the window to the current second, whose counts are
// the last slot's; the one before it is the last complete second.
function chartAdvance() {
  const now = Math.floor(Date.now() / 1000);
  while (chart.sec < now) {
    chart.sec++;
    chart.ok.shift(); chart.ok.push(0);
    chart.bad.shift(); chart.bad.push(0);
  }
}

function chartTick() {
  chartAdvance();
  const c = $('#chart');
  const g = c.getContext('2d');
  const max = Math.max(1, ...chart.ok, ...chart.bad);
  g.clearRect(0, 0, c.width, c.height);
  for (const [series, color] of [[chart.ok, '#4ade80'], [chart.bad, '#f87171']]) {
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.beginPath();
    series.forEach((v, i) => {
      const x = (i / 59) * (c.width - 2) + 1;
      const y = c.height - 2 - (v / max) * (c.height - 6);
      if (i) g.lineTo(x, y); else g.moveTo(x, y);
    });
    g.stroke();
  }
  // The text tells the last complete second: the current one has only begun.
  c.setAttribute('aria-label', `Last second: ${chart.ok[58]} completed, ${chart.bad[58]} failed; peak ${max} per second`);
}

// onEvent applies one live event. A job that waits is fetched whole for
// its row; when a newer event of the same job has come while that fetch
// was out, the newer one decides, so a late answer cannot put back a job
// that has since moved on. #live's data-seq is the newest event applied.
async function onEvent(ev) {
  // Counted in the second it came in, whenever the chart was last drawn.
  chartAdvance();
  if (ev.type === 'completed') chart.ok[59]++;
  if (ev.type === 'failed' || ev.type === 'timed_out') chart.bad[59]++;
  state.latest.set(ev.jobId, ev.seq);
  for (const moved of state.loading) moved.add(ev.jobId);
  let job = null;
  if (WAITING.has(ev.status)) {
    try { job = await api('/api/jobs/' + encodeURIComponent(ev.jobId)); } catch (e) { /* gone */ }
  }
  if (state.latest.get(ev.jobId) === ev.seq) {
    if (job && WAITING.has(job.status)) {
      state.inbox.set(ev.jobId, job);
    } else {
      state.inbox.delete(ev.jobId);
      state.latest.delete(ev.jobId);
    }
    renderInbox();
    if (state.current === ev.jobId) showJob(ev.jobId, true);
  }
  const live = $('#live');
  if (!(Number(live.dataset.seq) >= ev.seq)) live.dataset.seq = String(ev.seq);
}

// parseFrames takes the complete Server-Sent Events frames off the front
// of buf and returns [frames, rest]; a frame is {id, event, data}.
function parseFrames(buf) {
  const frames = [];
  let i;
  while ((i = buf.indexOf('\n\n')) >= 0) {
    const f = { id: null, event: 'message', data: [] };
    for (const line of buf.slice(0, i).split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      let v = c < 0 ? '' : line.slice(c + 1);
      if (v.startsWith(' ')) v = v.slice(1);
      if (field === 'id') f.id = v;
      else if (field === 'event') f.event = v;
      else if (field === 'data') f.data.push(v);
    }
    frames.push(f);
    buf = buf.slice(i + 2);
  }
  return [frames, buf];
}

// onProgress shows a job's progress (the stream's progress frames, which
// are not events) in its detail, when that is open.
function onProgress(p) {
  if (state.current !== p.jobId || $('#job').dataset.job !== p.jobId) return;
  const bar = progressBar(p);
  const old = $('#job-progress');
  if (old) old.replaceWith(bar);
  else if ($('#job .facts')) $('#job .facts').after(bar);
}

// connect reads /api/events?progress=1 with fetch rather than
// EventSource, which cannot send the session's Authorization header. Like EventSource it
// reconnects after a second and sends Last-Event-ID, so the stream
// resumes after the last event it had, without a gap.
async function connect() {
  let last = null;
  for (;;) {
    const ctl = new AbortController();
    state.stream = ctl;
    try {
      const headers = authHeaders();
      if (last !== null) headers['Last-Event-ID'] = last;
      const r = await fetch('/api/events?progress=1', { headers, signal: ctl.signal, cache: 'no-store' });
      if (r.status === 401) {
        const v = await r.json().catch(() => ({}));
        loggedOut(null, v.error);
        return;
      }
      if (!r.ok || !r.body) throw new Error(r.statusText);
      $('#live').textContent = 'live';
      loadInbox().catch(() => {});
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        let frames;
        [frames, buf] = parseFrames(buf + value);
        for (const f of frames) {
          if (f.id !== null) last = f.id;
          if (f.event === 'message' && f.data.length) onEvent(JSON.parse(f.data.join('\n')));
          else if (f.event === 'progress' && f.data.length) onProgress(JSON.parse(f.data.join('\n')));
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    $('#live').textContent = 'reconnecting…';
    await new Promise((done) => setTimeout(done, 1000));
    // Logged out meanwhile (berthd ends a session's streams): no new one.
    if (ctl.signal.aborted) return;
  }
}

// ---- a job's detail -------------------------------------------------------

function payload(title, v) {
  if (v === undefined || v === null) return null;
  return h('div', { class: 'card' }, h('h3', {}, title), h('pre', { tabindex: 0 }, JSON.stringify(v, null, 2)));
}

function message(box, kind, text) {
  box.replaceChildren(h('p', { class: 'msg ' + kind, role: kind === 'error' ? 'alert' : 'status' }, text));
}

function errorText(e) {
  const errs = e.error && e.error.data && e.error.data.errors;
  return e.message + (errs ? ': ' + errs.map((x) => (x.instancePath || '/') + ' ' + x.message).join('; ') : '');
}

// act runs action on job; its buttons are off meanwhile and on again
// after, as the action may leave the job where it was (an approval below
// its quorum).
async function act(job, action, body, box) {
  for (const b of document.querySelectorAll('#job button')) b.disabled = true;
  try {
    await api('/api/jobs/' + encodeURIComponent(job.id) + '/' + action, body);
    message(box, 'ok', 'Done.');
    await showJob(job.id, true);
  } catch (e) {
    message(box, 'error', errorText(e));
  }
  for (const b of document.querySelectorAll('#job button')) b.disabled = false;
}

function approvalCard(job) {
  const box = h('div', { 'aria-live': 'polite' });
  const note = h('textarea', { id: 'reason', rows: 2, name: 'reason' });
  return h('div', { class: 'card', 'data-keep': 'approval' }, h('h3', {}, 'Approval'),
    h('p', {}, 'This tool asks before it runs.'),
    h('form', { class: 'act', onsubmit: (e) => e.preventDefault() },
      h('label', { for: 'reason' }, 'Reason or note (optional)', note),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'primary', id: 'approve',
          onclick: () => act(job, 'approve', note.value ? { note: note.value } : {}, box) }, 'Approve'),
        h('button', { type: 'button', class: 'danger', id: 'decline',
          onclick: () => act(job, 'decline', note.value ? { reason: note.value } : {}, box) }, 'Decline'))),
    box);
}

function resumeCard(job) {
  const tool = state.tools.get(job.tool) || {};
  const schema = tool.resumeSchema || { type: 'object' };
  const box = h('div', { 'aria-live': 'polite' });
  const field = buildField(schema, 'resume', schema.title || 'Resume data', true);
  const form = h('form', { class: 'form', id: 'resume-form', novalidate: true,
    onsubmit: (e) => {
      e.preventDefault();
      const errors = [];
      const data = field.read(errors);
      if (errors.length) {
        message(box, 'error', 'Please fix: ' + errors.join('; '));
        const first = form.querySelector('[aria-invalid=true]');
        if (first) first.focus();
        return;
      }
      act(job, 'resume', { resumeData: data === undefined ? {} : data }, box);
    } },
  field.el, h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'resume' }, 'Resume')));
  return h('div', { class: 'card', 'data-keep': 'resume' }, h('h3', {}, 'Resume'), form, box);
}

async function showJob(id, refresh) {
  state.current = id;
  const root = $('#job');
  let job, events;
  try {
    [job, events] = await Promise.all([
      api('/api/jobs/' + encodeURIComponent(id) + '?view=display'),
      api('/api/jobs/' + encodeURIComponent(id) + '/events'),
    ]);
  } catch (e) {
    root.replaceChildren(h('p', { class: 'msg error' }, errorText(e)));
    return;
  }
  if (state.current !== id) return;
  // A refresh comes with every event of the job, and an event may leave
  // its status as it was (an approval below the quorum): all is shown
  // again but the form of the status, which is kept as it is (with what
  // someone is typing into it, and the focus).
  const kept = refresh && root.dataset.job === id && root.dataset.status === job.status
    ? root.querySelector('[data-keep]') : null;
  const focused = kept && kept.contains(document.activeElement) ? document.activeElement : null;
  const tool = state.tools.get(job.tool) || {};
  $('#job-title').textContent = (tool.title || job.tool) + ' · ' + job.status.replace('_', ' ');
  const p = job.progress;
  root.dataset.job = id;
  root.dataset.status = job.status;
  root.replaceChildren(...[
    h('div', { class: 'card' },
      h('dl', { class: 'facts' },
        h('dt', {}, 'Status'), h('dd', {}, h('span', { class: 'badge ' + job.status, id: 'job-status' }, job.status)),
        h('dt', {}, 'Tool'), h('dd', {}, job.tool + (tool.description ? ' — ' + tool.description : '')),
        h('dt', {}, 'Job'), h('dd', {}, job.id),
        h('dt', {}, 'Attempt'), h('dd', {}, String(job.attempt || 1)),
        h('dt', {}, 'Created'), h('dd', {}, when(job.createdAt)),
        job.finishedAt ? [h('dt', {}, 'Finished'), h('dd', {}, when(job.finishedAt))] : null,
        job.submittedBy ? [h('dt', {}, 'Submitted by'), h('dd', {}, who(job.submittedBy, job.submittedVia))] : null,
        job.approval && job.approval.required ? [h('dt', {}, 'Approvals'), h('dd', { id: 'job-approvals' },
          approvalsText(job.approval))] : null,
        job.approval && job.approval.decidedBy ? [h('dt', {}, job.approval.decision === 'declined' ? 'Declined by' : 'Approved by'),
          h('dd', { id: 'job-decided-by' }, who(job.approval.decidedBy.name, job.approval.decidedBy.via) + ', ' + when(job.approval.decidedAt))] : null,
        job.approval && job.approval.reason ? [h('dt', {}, 'Reason'), h('dd', {}, job.approval.reason)] : null,
        job.approval && job.approval.note ? [h('dt', {}, 'Note'), h('dd', {}, job.approval.note)] : null),
      p ? progressBar(p) : null),
    job.status === 'awaiting_approval' ? kept || approvalCard(job) : null,
    job.status === 'suspended' ? kept || resumeCard(job) : null,
    payload('Suspend payload', job.status === 'suspended' ? job.suspendPayload : undefined),
    payload('Input', job.input),
    payload('Output', job.output),
    payload('Error', job.error),
    h('div', { class: 'card' }, h('h3', {}, 'Timeline'),
      h('ol', { class: 'timeline' }, events.events.map((e) =>
        h('li', {}, h('span', { class: 'badge ' + e.status }, e.type), h('time', { datetime: e.at }, when(e.at)),
          h('span', { class: 'by' }, 'by ' + who(e.by, e.via, e.client)))))),
    TERMINAL.has(job.status) ? null : h('div', { class: 'actions' },
      h('button', { type: 'button', id: 'cancel', onclick: () => act(job, 'cancel', {}, root.querySelector('.cancel-box')) }, 'Cancel job')),
    h('div', { class: 'cancel-box', 'aria-live': 'polite' }),
  ].filter(Boolean));
  if (focused) focused.focus();
}

function progressBar(p) {
  return h('p', { id: 'job-progress' }, h('label', {}, p.message || 'Progress',
    h('progress', { value: p.progress, max: p.total || undefined })));
}

// ---- the form generated from a JSON Schema -------------------------------

let fieldSeq = 0;

// buildField returns {el, read(errors), empty()} for schema; read returns
// the value (undefined for an empty optional field) and pushes messages to
// errors; empty tells whether nothing was filled in (or checked, or
// added).
function buildField(schema, name, label, required) {
  schema = schema || {};
  const id = 'f' + (++fieldSeq);
  const title = schema.title || label || name;
  const desc = schema.description ? h('span', { class: 'desc' }, schema.description) : null;
  const err = h('span', { class: 'err', id: id + '-err', 'aria-live': 'polite' });
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  const fail = (input, errors, text) => {
    input.setAttribute('aria-invalid', 'true');
    err.textContent = text;
    errors.push(title + ': ' + text);
  };
  const ok = (input) => { input.removeAttribute('aria-invalid'); err.textContent = ''; };

  if (type === 'object' || (!type && schema.properties)) {
    const req = new Set(schema.required || []);
    const kids = Object.entries(schema.properties || {}).map(([k, s]) => [k, buildField(s, k, s.title || k, req.has(k))]);
    const el = h('fieldset', { id }, h('legend', {}, title + (required ? '' : ' (optional)')), desc, kids.map(([, f]) => f.el));
    const empty = () => kids.every(([, f]) => f.empty());
    return { el, empty, read(errors) {
      // An optional object none of whose fields is filled is left out:
      // its required members count once one of them is.
      if (!required && empty()) {
        for (const i of el.querySelectorAll('[aria-invalid]')) i.removeAttribute('aria-invalid');
        for (const e of el.querySelectorAll('.err')) e.textContent = '';
        return undefined;
      }
      const out = {};
      for (const [k, f] of kids) { const v = f.read(errors); if (v !== undefined) out[k] = v; }
      return out;
    } };
  }
  if (type === 'array') {
    const items = [];
    const list = h('div', { class: 'form' });
    const add = h('button', { type: 'button', onclick: () => addItem(true) }, 'Add ' + (schema.items && schema.items.title || 'item'));
    const addItem = (focus) => {
      const f = buildField(schema.items || {}, name + '[]', (schema.items && schema.items.title) || 'Item ' + (items.length + 1), true);
      const row = h('div', { class: 'row' }, f.el, h('button', { type: 'button', 'aria-label': 'Remove', onclick: () => {
        items.splice(items.indexOf(f), 1); row.remove();
      } }, 'Remove'));
      items.push(f);
      list.append(row);
      if (focus) { const i = row.querySelector('input,select,textarea'); if (i) i.focus(); }
    };
    for (let i = 0; i < (schema.minItems || 0); i++) addItem(false);
    const el = h('fieldset', { id, 'data-array': name }, h('legend', {}, title + (required ? '' : ' (optional)')), desc, list, add, err);
    return { el, empty: () => items.every((f) => f.empty()), read(errors) {
      const out = items.map((f) => f.read(errors)).filter((v) => v !== undefined);
      if (schema.minItems && out.length < schema.minItems) fail(add, errors, `at least ${schema.minItems} items`);
      else if (schema.maxItems !== undefined && out.length > schema.maxItems) fail(add, errors, `at most ${schema.maxItems} items`);
      else ok(add);
      return out.length || required ? out : undefined;
    } };
  }
  if (type === 'boolean') {
    const input = h('input', { type: 'checkbox', id, name, checked: schema.default === true });
    const el = h('label', { class: 'check', for: id }, input, title, desc);
    return { el, empty: () => !input.checked, read() { return input.checked; } };
  }
  let input;
  if (Array.isArray(schema.enum)) {
    input = h('select', { id, name, 'aria-describedby': id + '-err' },
      h('option', { value: '' }, required ? 'choose…' : '—'),
      schema.enum.map((v, i) => h('option', { value: String(i), selected: schema.default === v }, String(v))));
  } else if (type === 'integer' || type === 'number') {
    input = h('input', { id, name, type: 'number', inputmode: type === 'integer' ? 'numeric' : 'decimal',
      step: type === 'integer' ? '1' : 'any', min: schema.minimum, max: schema.maximum,
      value: schema.default, 'aria-describedby': id + '-err' });
  } else if (schema.format === 'textarea' || (schema.maxLength || 0) > 200) {
    input = h('textarea', { id, name, rows: 3, 'aria-describedby': id + '-err' }, schema.default || '');
  } else {
    input = h('input', { id, name, type: 'text', value: schema.default,
      autocomplete: 'off', 'aria-describedby': id + '-err' });
  }
  if (required) input.setAttribute('aria-required', 'true');
  const el = h('label', { for: id }, title + (required ? ' *' : ''), desc, input, err);
  return { el, empty: () => input.value === '', read(errors) {
    const raw = input.value;
    if (raw === '') {
      if (required) { fail(input, errors, 'required'); return undefined; }
      ok(input);
      return undefined;
    }
    let v = raw;
    if (Array.isArray(schema.enum)) v = schema.enum[Number(raw)];
    else if (type === 'integer' || type === 'number') {
      v = Number(raw);
      if (!Number.isFinite(v) || (type === 'integer' && !Number.isInteger(v))) { fail(input, errors, type === 'integer' ? 'a whole number' : 'a number'); return undefined; }
      if (schema.minimum !== undefined && v < schema.minimum) { fail(input, errors, `at least ${schema.minimum}`); return undefined; }
      if (schema.maximum !== undefined && v > schema.maximum) { fail(input, errors, `at most ${schema.maximum}`); return undefined; }
    } else {
      if (schema.minLength && v.length < schema.minLength) { fail(input, errors, `at least ${schema.minLength} characters`); return undefined; }
      if (schema.maxLength !== undefined && v.length > schema.maxLength) { fail(input, errors, `at most ${schema.maxLength} characters`); return undefined; }
      if (schema.pattern && !new RegExp(schema.pattern, 'u').test(v)) { fail(input, errors, 'does not match ' + schema.pattern); return undefined; }
    }
    ok(input);
    return v;
  } };
}

// ---- the jobs browser -----------------------------------------------------

function jobsQuery() {
  const q = new URLSearchParams();
  const st = [...document.querySelectorAll('#status-boxes input:checked')].map((i) => i.value);
  if (st.length) q.set('status', st.join(','));
  if ($('#f-tool').value) q.set('tool', $('#f-tool').value);
  if ($('#f-run').value) q.set('runId', $('#f-run').value);
  q.set('limit', $('#f-limit').value || '50');
  return q;
}

async function loadJobs(more) {
  const q = jobsQuery();
  if (more && state.cursor) q.set('cursor', state.cursor);
  const body = $('#jobs-table tbody');
  try {
    const v = await api('/api/jobs?' + q);
    const rows = v.jobs.map((j) => h('tr', {},
      h('td', {}, h('a', { href: '#/job/' + j.id }, j.id.slice(-12))),
      h('td', {}, j.tool), h('td', {}, h('span', { class: 'badge ' + j.status }, j.status)),
      h('td', {}, when(j.createdAt))));
    if (more) body.append(...rows); else body.replaceChildren(...rows);
    state.cursor = v.nextCursor || null;
    $('#jobs-more').hidden = !state.cursor;
  } catch (e) {
    body.replaceChildren(h('tr', {}, h('td', { colspan: 4, class: 'msg error' }, errorText(e))));
  }
}

// ---- routing ----------------------------------------------------------------

function route() {
  const hash = location.hash || '#/inbox';
  const job = hash.match(/^#\/job\/(.+)$/);
  $('#view-inbox').hidden = hash !== '#/inbox';
  $('#view-jobs').hidden = hash !== '#/jobs';
  $('#view-job').hidden = !job;
  $('#nav-inbox').toggleAttribute('aria-current', hash === '#/inbox');
  $('#nav-jobs').toggleAttribute('aria-current', hash === '#/jobs');
  if (hash === '#/inbox' || hash === '#/jobs') {
    for (const a of document.querySelectorAll('nav a[aria-current]')) a.setAttribute('aria-current', 'page');
  }
  state.current = null;
  if (job) {
    $('#job').dataset.job = '';
    showJob(decodeURIComponent(job[1]), false).then(() => $('#job-title').focus && $('#main').focus());
  } else if (hash === '#/jobs') {
    loadJobs(false);
  }
}

async function main() {
  for (const s of STATUSES) {
    $('#status-boxes').append(h('label', {}, h('input', { type: 'checkbox', value: s }), s.replace('_', ' ')));
  }
  $('#filters').addEventListener('submit', (e) => { e.preventDefault(); loadJobs(false); });
  $('#logout').addEventListener('click', logout);
  if (!sessionStorage.getItem(SESSION_KEY)) $('#logout').hidden = true;
  $('#jobs-more').addEventListener('click', () => loadJobs(true));
  window.addEventListener('hashchange', route);
  setInterval(chartTick, 1000);
  chartTick();
  try {
    await loadTools();
  } catch (e) {
    $('#live').textContent = 'offline';
    return;
  }
  // Who is logged in: the principal this tab's session acts as.
  try {
    const info = await api('/api/info');
    if (info.principal) {
      $('#whoami').textContent = 'Logged in as ' + info.principal.name + ' (' + (info.principal.roles || []).join(', ') + ')';
      $('#whoami').hidden = false;
    }
  } catch (e) { /* the inbox works without it */ }
  route();
  connect();
}

main();
