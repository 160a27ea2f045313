// The dashboard's stylesheet and script, shipped in the package as text and served from its own path: no CDN,
// no build step, nothing inline (a Content-Security-Policy of 'self', as helmet's default, allows them). The
// script is plain JavaScript that every current browser runs as it is written here.

/** Colours by exit reason, shared by the chart's bars and the result labels. */
const STYLE = `
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --bg: #fff; --line: #d0d7de; --head: #f6f8fa;
  --up: #1a7f37; --down: #cf222e; --focus: #0969da; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --line: #30363d;
  --head: #161b22; --up: #3fb950; --down: #f85149; --focus: #58a6ff; } }
* { box-sizing: border-box; }
body { margin: 0 auto; padding: 1rem; max-width: 90rem; color: var(--fg); background: var(--bg); }
h1 { font-size: 1.5rem; margin: .25rem 0; overflow-wrap: anywhere; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
a { color: var(--focus); }
:focus-visible { outline: 2px solid var(--focus); outline-offset: 2px; }
small, .intro { color: var(--muted); }
.hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
.badge { border: 1px solid var(--line); border-radius: 1rem; padding: 0 .5rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .4rem .5rem; border-bottom: 1px solid var(--line); }
thead th { background: var(--head); font-weight: 600; }
tbody th { font-weight: 600; overflow-wrap: break-word; }
code { font-size: .9em; }
ul.next, ul.legend { list-style: none; margin: .2rem 0 0; padding: 0; font-size: .85em; color: var(--muted); }
ul.legend { display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
.up { color: var(--up); font-weight: 600; }
.down { color: var(--down); font-weight: 600; }
.state.paused { font-weight: 600; }
.state.stopped { color: var(--down); font-weight: 600; }
.controls { display: flex; flex-wrap: wrap; gap: .35rem; align-items: center; }
/* The actions work only with the script, which marks the page: without it, no button that would do nothing. */
html:not(.scripted) .needs-script { display: none; }
.controls input { flex: 1 1 100%; min-width: 0; padding: .35rem .45rem; font: inherit; border: 1px solid var(--line);
  border-radius: .35rem; background: var(--bg); color: var(--fg); }
button { font: inherit; padding: .35rem .75rem; border: 1px solid var(--line); border-radius: .35rem;
  background: var(--head); color: var(--fg); cursor: pointer; min-height: 2.25rem; }
button:hover { border-color: var(--focus); }
button[aria-disabled="true"] { opacity: .6; cursor: progress; }
section.actions { margin: 1rem 0; max-width: 24rem; }
section.editor form { max-width: 36rem; }
section.editor fieldset { border: 0; margin: 0 0 .5rem; padding: 0; display: flex; flex-wrap: wrap; gap: .5rem 1rem; }
section.editor fieldset[hidden] { display: none; }
section.editor legend { font-weight: 600; padding: 0; margin-bottom: .25rem; }
section.editor label { display: flex; flex-direction: column; font-size: .9em; gap: .15rem; }
section.editor fieldset.kind label { flex-direction: row; align-items: center; gap: .35rem; font-size: 1em; }
section.editor input[type="text"], section.editor input[type="number"], section.editor select { font: inherit;
  padding: .35rem .45rem; border: 1px solid var(--line); border-radius: .35rem; background: var(--bg); color: var(--fg);
  min-width: 8rem; }
section.editor input[name="cron"] { min-width: 14rem; }
small.handler { display: block; }
button[data-edit="remove"] { color: var(--down); }
dl.summary, dl.options { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 1rem 0; }
dt { font-weight: 600; }
dd { margin: 0; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
.counts a { margin-right: .15rem; }
.counts a[aria-current] { font-weight: 600; color: var(--fg); }
form.filter { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end; margin: .75rem 0; }
form.filter label { display: flex; flex-direction: column; font-size: .9em; gap: .15rem; }
form.filter input, form.filter select { font: inherit; padding: .35rem .45rem; border: 1px solid var(--line);
  border-radius: .35rem; background: var(--bg); color: var(--fg); min-width: 12rem; }
nav.pager { margin: .75rem 0; }
/* The runs and the audit trail: one line per entry, the table scrolled sideways where it is wider. */
.scroll th, .scroll td { white-space: nowrap; }
.scroll td.text { white-space: normal; min-width: 14rem; }
/* Wide screens: the list's columns keep their widths, so that a row's buttons stay where they were; its buttons
   are a little smaller, to fit on one line beside the others. */
@media (min-width: 75.01rem) {
  table.jobs { table-layout: fixed; }
  table.jobs thead th { font-size: .9em; }
  table.jobs th, table.jobs td { padding: .4rem; }
  .col-job { width: 12.5%; } .col-schedule { width: 12.5%; } .col-state { width: 9%; } .col-holder { width: 12.5%; }
  .col-next-tick { width: 8%; } .col-last-run { width: 10.5%; } .col-failures { width: 6.5%; }
  .col-health { width: 7.5%; }
  /* A word breaks only where it cannot fit at all (a very long replica name): the columns fit the usual ones. */
  table.jobs td, table.jobs tbody th { overflow-wrap: break-word; }
  table.jobs button { padding: .25rem .55rem; font-size: .9em; min-height: 2rem; }
}
figure.chart { margin: 0 0 1rem; }
figure.chart svg { width: 100%; height: 8rem; display: block; border-bottom: 1px solid var(--line); }
.swatch { display: inline-block; width: .8em; height: .8em; margin-right: .3em; border-radius: 2px; }
.reason-normal { fill: #1a7f37; background: #1a7f37; }
.reason-error { fill: #cf222e; background: #cf222e; }
.reason-timeout { fill: #bc4c00; background: #bc4c00; }
.reason-killed { fill: #8250df; background: #8250df; }
.reason-shutdown { fill: #6e7781; background: #6e7781; }
.reason-leaseLost { fill: #9a6700; background: #9a6700; }
.reason-running { fill: #0969da; background: #0969da; }
rect.reason-running { fill-opacity: .5; }
span.reason { color: #fff; padding: 0 .4rem; border-radius: .3rem; font-size: .85em; }
.banner { margin: 0 0 .75rem; padding: .6rem .8rem; border: 2px solid var(--down); border-radius: .4rem; }
.unread { color: var(--down); }
.absolute { color: var(--muted); font-size: .9em; }
.buttons { display: contents; }
.announce { position: sticky; bottom: 0; margin: 1rem 0 0; background: var(--bg); }
.announce:not(:empty) { padding: .5rem 0; border-top: 1px solid var(--line); }
.announce.failed { color: var(--down); font-weight: 600; }
/* Up to 75rem (1200 px): each job is a card, each cell a line with its column's name, two cards a row on a tablet and
   one on a phone; the rows' roles keep the table's meaning. On a phone the runs and the audit trail are cards too. */
@media (max-width: 75rem) {
  table.jobs, table.jobs thead, table.jobs tbody, table.jobs tr, table.jobs th, table.jobs td { display: block; }
  table.jobs col { display: none; }
  table.jobs thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  table.jobs tbody { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 24rem), 1fr)); gap: .75rem; }
  table.jobs tr { border: 1px solid var(--line); border-radius: .5rem; padding: .25rem 0; }
  table.jobs th, table.jobs td { border: 0; padding: .2rem .75rem; overflow-wrap: anywhere; }
  table.jobs td { position: relative; padding-left: 7.5rem; min-height: 1.9rem; }
  table.jobs td::before { content: attr(data-label); position: absolute; left: .75rem; width: 6.5rem;
    font-size: .85em; line-height: 1.7; color: var(--muted); }
  /* The actions take the card's whole width, under their name. */
  table.jobs td[data-label="Actions"] { padding-left: .75rem; }
  table.jobs td[data-label="Actions"]::before { position: static; display: block; width: auto; }
}
@media (max-width: 40rem) {
  table.cards, table.cards thead, table.cards tbody, table.cards tr, table.cards th, table.cards td { display: block; }
  table.cards thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  table.cards tr { border: 1px solid var(--line); border-radius: .5rem; margin: 0 0 .5rem; padding: .25rem 0; }
  .scroll table.cards th, .scroll table.cards td { border: 0; padding: .1rem .75rem; white-space: normal; min-width: 0;
    overflow-wrap: anywhere; }
  table.cards td { position: relative; padding-left: 6rem !important; }
  table.cards td::before { content: attr(data-label); position: absolute; left: .75rem; width: 5rem; font-size: .85em;
    line-height: 1.7; color: var(--muted); }
  table.cards td:empty, table.cards .wide { display: none; }
  dl.summary, dl.options { grid-template-columns: 1fr; }
  dd { margin-bottom: .4rem; }
}
`;

const SCRIPT = `'use strict';
(function () {
  var body = document.body;
  var api = body.getAttribute('data-api');
  var announce = document.getElementById('announce');
  var EVERY = 5000;
  var DONE = { trigger: 'Triggered', pause: 'Paused', resume: 'Resumed' };

  function say(text, failed) {
    announce.textContent = text;
    announce.className = failed ? 'announce failed' : 'announce';
  }

  // Live parts are matched by the job they belong to and their name, in the page and in a fresh copy of it.
  function keyOf(element) {
    var job = element.closest('[data-job]');
    return (job ? job.getAttribute('data-job') : '') + '\\n' + element.getAttribute('data-live');
  }
  function leaves(root) {
    var found = {};
    root.querySelectorAll('[data-live]').forEach(function (element) {
      if (!element.querySelector('[data-live]')) found[keyOf(element)] = element;
    });
    return found;
  }
  function jobsIn(root) {
    var names = [];
    root.querySelectorAll('tr[data-job]').forEach(function (row) { names.push(row.getAttribute('data-job')); });
    return names.join('\\n');
  }

  var refreshing = null;
  function refresh() {
    if (refreshing) return refreshing;
    refreshing = fetch(location.href, { headers: { Accept: 'text/html' }, cache: 'no-store', credentials: 'same-origin' })
      .then(function (response) {
        if (!response.ok) throw new Error('the dashboard answered ' + response.status);
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, 'text/html');
        var rows = document.querySelector('[data-live="rows"]');
        var freshRows = fresh.querySelector('[data-live="rows"]');
        // Jobs added or removed: the whole list again (a note being typed in a row is lost then).
        if (rows && freshRows && jobsIn(rows) !== jobsIn(freshRows)) rows.innerHTML = freshRows.innerHTML;
        var now = leaves(fresh);
        var shown = leaves(document);
        Object.keys(shown).forEach(function (key) {
          if (!now[key] || now[key].innerHTML === shown[key].innerHTML) return;
          // A button that had the focus is replaced (Pause by Resume): the focus goes to its successor.
          var focused = shown[key].contains(document.activeElement) && document.activeElement;
          shown[key].innerHTML = now[key].innerHTML;
          if (!focused) return;
          var same = shown[key].querySelector('[data-action="' + focused.getAttribute('data-action') + '"]');
          var buttons = shown[key].querySelectorAll('button');
          var next = same || buttons[buttons.length - 1];
          if (next) next.focus();
        });
        localTimes(document);
        if (announce.className.indexOf('stale') >= 0) say('');
      })
      .catch(function (error) {
        say('Not refreshed: ' + error.message, true);
        announce.className = 'announce failed stale';
      })
      .then(function () { refreshing = null; });
    return refreshing;
  }

  // Exact times in the viewer's own time zone: the tooltips of relative times, and those a job's page shows.
  var exact = new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
    timeZoneName: 'short',
  });
  function localTimes(root) {
    root.querySelectorAll('time[datetime]').forEach(function (element) {
      element.title = exact.format(new Date(element.getAttribute('datetime')));
    });
    root.querySelectorAll('[data-absolute]').forEach(function (element) {
      element.textContent = '(' + exact.format(new Date(element.getAttribute('data-absolute'))) + ')';
    });
  }
  localTimes(document);

  document.documentElement.classList.add('scripted');
  // Why a tick started nothing, in words.
  var WHY = {
    paused: 'the job is paused',
    notLeaseHolder: 'this replica does not hold the lease',
    noHolder: 'no replica holds the lease',
    jobNotStarted: 'its guard said no, or a run is still going and onOverlap is ignore',
  };

  // A POST of the API with a JSON body: the answer's status and its JSON (an empty object when it has none).
  function post(name, action, body) {
    return fetch(api + '/jobs/' + encodeURIComponent(name) + '/' + action, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      credentials: 'same-origin',
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().then(
        function (answer) { return { response: response, answer: answer }; },
        function () { return { response: response, answer: {} }; }
      );
    });
  }

  function act(button) {
    // Busy, not disabled: a disabled button would lose the keyboard's focus.
    if (button.getAttribute('aria-disabled') === 'true') return;
    var scope = button.closest('[data-job]');
    var name = scope.getAttribute('data-job');
    var action = button.getAttribute('data-action');
    var noteField = scope.querySelector('input[name="note"]');
    var note = noteField ? noteField.value.trim() : '';
    button.setAttribute('aria-disabled', 'true');
    say(action[0].toUpperCase() + action.slice(1) + ' ' + name + '…');
    post(name, action, note === '' ? {} : { note: note })
      .then(function (got) {
        var answer = got.answer;
        if (got.response.status === 409) {
          say(name + ': nothing started: ' + (WHY[answer.error] || answer.error), true);
        } else if (got.response.status === 503) {
          say(name + ': ' + action + ' failed: the store does not answer; try again once it does', true);
        } else if (!got.response.ok) {
          say(name + ': ' + action + ' refused (' + got.response.status + ' ' + (answer.message || '') + ')', true);
        } else {
          var where = answer.replica ? ' on ' + answer.replica : '';
          var run = answer.jobId !== undefined ? ', run #' + answer.jobId + where : '';
          say(DONE[action] + ' ' + name + run);
          if (noteField) noteField.value = '';
        }
      })
      .catch(function (error) { say(name + ': ' + action + ' failed (' + error.message + ')', true); })
      .then(function () {
        button.removeAttribute('aria-disabled');
        return refresh();
      });
  }

  // Why the dashboard refused an edit or a backfill: the store out of reach, or its own message.
  function refusal(got) {
    if (got.response.status === 503) return 'the store does not answer; try again once it does';
    return got.answer.message || got.response.status;
  }

  // A stored schedule's editor: a new timing, or its removal, sent with the version the page was read at.
  var UNIT = { ms: 1, s: 1000, min: 60000, h: 3600000 };
  var gone = false;
  function edit(scope, action, button) {
    if (button.getAttribute('aria-disabled') === 'true') return;
    var name = scope.getAttribute('data-job');
    var form = scope.querySelector('form');
    var body = { ifVersion: Number(scope.getAttribute('data-version')) };
    if (action === 'schedule') {
      if (form.elements.kind.value === 'every') {
        body.every = Number(form.elements.every.value) * UNIT[form.elements.unit.value];
      } else {
        body.cron = form.elements.cron.value.trim();
        if (form.elements.timezone.value.trim() !== '') body.timezone = form.elements.timezone.value.trim();
      }
    } else if (!window.confirm('Remove the schedule ' + name + ' for the whole fleet? Its runs stop; its history stays readable.')) {
      return;
    }
    button.setAttribute('aria-disabled', 'true');
    say((action === 'remove' ? 'Removing ' : 'Saving ') + name + '…');
    post(name, action, body)
      .then(function (got) {
        var answer = got.answer;
        if (!got.response.ok) {
          var why = refusal(got);
          say(name + ': not ' + (action === 'remove' ? 'removed' : 'saved') + ': ' + why, true);
        } else if (action === 'remove') {
          gone = true;
          var main = document.querySelector('main');
          var done = document.createElement('p');
          var back = document.createElement('a');
          back.href = api.slice(0, -4) || '.';
          back.textContent = 'All jobs';
          done.textContent = 'The schedule ' + name + ' is removed for the whole fleet. ';
          done.appendChild(back);
          main.replaceChildren(done);
          say('Removed ' + name);
        } else {
          scope.setAttribute('data-version', String(answer.version));
          scope.querySelector('[data-version-text]').textContent = String(answer.version);
          say('Saved ' + name + ', version ' + answer.version);
        }
      })
      .catch(function (error) { say(name + ': ' + action + ' failed (' + error.message + ')', true); })
      .then(function () {
        button.removeAttribute('aria-disabled');
        if (!gone) return refresh();
      });
  }
  document.addEventListener('submit', function (event) {
    var form = event.target.closest('form[data-edit]');
    if (!form) return;
    event.preventDefault();
    edit(form.closest('[data-job]'), 'schedule', form.querySelector('button[type="submit"]'));
  });
  document.addEventListener('change', function (event) {
    if (event.target.name !== 'kind' || !event.target.closest('form[data-edit]')) return;
    event.target.form.querySelectorAll('fieldset[data-kind]').forEach(function (fields) {
      var shown = fields.getAttribute('data-kind') === event.target.value;
      fields.hidden = !shown;
      fields.disabled = !shown;
    });
  });

  // A backfill: its range in the viewer's zone, sent as instants; or the cancellation of the one under way.
  function backfill(scope, action, button, body) {
    if (button.getAttribute('aria-disabled') === 'true') return;
    var name = scope.getAttribute('data-job');
    var slots = function (count) { return count + ' slot' + (count === 1 ? '' : 's'); };
    button.setAttribute('aria-disabled', 'true');
    say((action === 'backfill' ? 'Asking for a backfill of ' : 'Cancelling the backfill of ') + name + '…');
    post(name, action, body)
      .then(function (got) {
        var answer = got.answer;
        if (!got.response.ok) {
          var why = refusal(got);
          say(name + ': ' + (action === 'backfill' ? 'backfill refused' : 'backfill not cancelled') + ': ' + why, true);
        } else if (action === 'backfill') {
          say('Backfill of ' + name + ': ' + slots(answer.slots) + ' to run');
        } else {
          say('Backfill of ' + name + ' cancelled: ' + slots(answer.dropped) + ' dropped');
        }
      })
      .catch(function (error) { say(name + ': ' + action + ' failed (' + error.message + ')', true); })
      .then(function () {
        button.removeAttribute('aria-disabled');
        return refresh();
      });
  }
  document.addEventListener('submit', function (event) {
    var form = event.target.closest('form[data-backfill]');
    if (!form) return;
    event.preventDefault();
    var from = new Date(form.elements.from.value);
    var to = new Date(form.elements.to.value);
    if (isNaN(from.getTime()) || isNaN(to.getTime())) return say('Give the backfill both its times', true);
    var body = { from: from.toISOString(), to: to.toISOString() };
    if (form.elements.note.value.trim() !== '') body.note = form.elements.note.value.trim();
    backfill(form.closest('[data-job]'), 'backfill', form.querySelector('button[type="submit"]'), body);
  });

  document.addEventListener('click', function (event) {
    var button = event.target.closest && event.target.closest('button[data-action]');
    if (button) act(button);
    var cancel = event.target.closest && event.target.closest('button[data-backfill="cancel"]');
    if (cancel && window.confirm('Cancel the backfill? The slots it has not run yet are dropped.')) {
      backfill(cancel.closest('[data-job]'), 'cancelBackfill', cancel, {});
    }
    var remove = event.target.closest && event.target.closest('button[data-edit="remove"]');
    if (remove) edit(remove.closest('[data-job]'), 'remove', remove);
  });
  setInterval(function () {
    if (document.visibilityState === 'visible' && !gone) refresh();
  }, EVERY);
})();
`;

/** The pages' icon, a clock: served from the dashboard's path, which a Content-Security-Policy of 'self' allows. */
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16" fill="none" stroke="#0969da" stroke-width="2" stroke-linecap="round"><circle cx="8" cy="8" r="6.5"/><path d="M8 4.5V8l2.5 1.5"/></svg>`;

/** The assets by file name, with their content types. */
export const ASSETS: Record<string, { type: string; body: string }> = {
  'dashboard.css': { type: 'text/css; charset=utf-8', body: STYLE },
  'dashboard.js': { type: 'text/javascript; charset=utf-8', body: SCRIPT },
  'icon.svg': { type: 'image/svg+xml', body: ICON },
};
