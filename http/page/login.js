// The login page: it takes the token from the login URL's fragment (which
// a browser sends nowhere), trades it for a session with POST /api/session,
// keeps the session in this tab's sessionStorage (this origin's alone: no
// other port or host ever sees it) and goes to the inbox. A used or
// expired link is explained here, as a page, not as an error document.
'use strict';

function show(id, text) {
  for (const other of ['login-refused', 'login-none']) document.getElementById(other).hidden = other !== id;
  document.getElementById('login-working').hidden = !!id;
  if (text) document.getElementById('login-why').textContent = text;
  document.getElementById('login-title').textContent = id ? 'Not logged in' : 'Logging in…';
}

async function main() {
  show(null);
  const hash = location.hash.slice(1);
  const fromHash = new URLSearchParams(hash).get('token') || (hash.includes('=') ? '' : hash);
  // ?token= is read too, for a link typed by hand with --token-file's token.
  const token = fromHash || new URLSearchParams(location.search).get('token');
  // The token leaves the address bar and the history at once.
  history.replaceState(null, '', '/login');
  if (!token) {
    show('login-none');
    return;
  }
  let r;
  try {
    r = await fetch('/api/session', { method: 'POST', headers: { Authorization: 'Bearer ' + token } });
  } catch (e) {
    show('login-refused', 'berthd could not be reached: ' + e.message);
    return;
  }
  if (r.status === 201) {
    const v = await r.json();
    sessionStorage.setItem('berth.session', v.session);
    location.replace('/');
    return;
  }
  const v = await r.json().catch(() => ({}));
  const why = (v.error && v.error.message) || r.statusText;
  if (r.status === 429) show('login-refused', 'Too many failed logins from here lately (' + why + ').');
  else show('login-refused', 'This login link was refused: it has expired, was used already, or is wrong.');
}

// A login URL pasted into this tab while it shows /login changes only the
// fragment, which loads nothing: it is taken up here.
window.addEventListener('hashchange', main);
main();
