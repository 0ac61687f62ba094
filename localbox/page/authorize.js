// The consent page of the local box: sign in to an account with its
// one-time sign-in code, then Allow or Deny the request in the URL.
// Text from the request is only ever set as textContent. Without this
// script the page's forms post to the server instead (localbox/form.go);
// with it, they never do.
'use strict';

const query = location.search.slice(1);
const $ = (id) => document.getElementById(id);
const key = 'cocoonbox.session';

function show(text) { $('message').textContent = text; }

async function api(path, body) {
  const r = await fetch(path, {
    method: 'POST',
    headers: {'Content-Type': 'application/json', 'X-Cocoonbox-Session': localStorage.getItem(key) || ''},
    body: JSON.stringify(body),
  });
  let data = {};
  try { data = await r.json(); } catch (e) { /* an empty answer */ }
  return {status: r.status, data};
}

function describe(data) {
  return data.error_description || data.error || 'the request failed';
}

async function check() {
  const {status, data} = await api('/cb/api/oauth/check', {query});
  if (status === 401) {
    localStorage.removeItem(key);
    $('consent').hidden = true;
    $('signin').hidden = false;
    show('Sign in to continue.');
    $('code').focus();
    return;
  }
  $('signin').hidden = true;
  if (data.redirect) {
    show('This sign-in request is not valid: ' + describe(data) + '. Returning to the application.');
    location.assign(data.redirect);
    return;
  }
  if (status !== 200) {
    show('This sign-in request is not valid: ' + describe(data) + '.');
    return;
  }
  $('question').textContent = 'Sign in the ' + data.client_name + ' on ' + data.device_name + '?';
  $('client').textContent = 'the ' + data.client_name + ' on ' + data.device_name;
  $('redirect').textContent = data.redirect_host;
  show('');
  $('consent').hidden = false;
  $('allow').focus();
}

$('signin').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('signin-submit').disabled = true;
  const {status, data} = await api('/cb/api/session', {code: $('code').value});
  $('signin-submit').disabled = false;
  if (status !== 200) {
    $('code').value = '';
    show('Not signed in: ' + describe(data) + '.');
    return;
  }
  localStorage.setItem(key, data.session);
  check();
});

async function answer(path, done) {
  $('allow').disabled = $('deny').disabled = true;
  const {status, data} = await api(path, {query});
  if (status === 401) { check(); return; }
  if (!data.redirect) {
    show('The local box refused: ' + describe(data) + '.');
    return;
  }
  show(done);
  $('consent').hidden = true;
  location.assign(data.redirect);
}

$('consent').addEventListener('submit', (ev) => ev.preventDefault());
$('allow').addEventListener('click', (ev) => { ev.preventDefault(); answer('/cb/api/oauth/approve', 'Allowed. Returning to the application…'); });
$('deny').addEventListener('click', (ev) => { ev.preventDefault(); answer('/cb/api/oauth/deny', 'Denied. Returning to the application…'); });

show('Loading…');
check();
