// Injected by html_report_browser_test before </body> of a copy of the page, after the page's own script:
// drives the page as a reader would (filters, search, sorting, opening a cell) and writes what it saw into
// a hidden <pre id="tm-selftest">, one "key=value" line each, which the test reads from Chromium's
// --dump-dom. Expectations the test cannot know for an arbitrary page (the committed one) are computed here
// from the page's own data and written beside what the DOM showed ("..._expected"). It ends with the
// richest cell's details open, for the screenshot.
//
// Loaded with a fragment (#q=...&open=...), it only reports what the page restored from it ("restored_...").
// The checks of newer features each have their own try and "exception_<part>" key, so an older page (the
// committed one before it is regenerated) still passes the checks every page must pass. Some steps wait for
// the browser (a link followed, back and forward), so the self-test is async; it writes when it is done.
(async function () {
  'use strict';
  const lines = [];
  const put = (key, value) => lines.push(key + '=' + String(value).replace(/\n/g, ' '));
  const $ = (selector) => document.querySelector(selector);
  const rows = () => Array.from(document.querySelectorAll('#matrix tbody tr'));
  const shownRows = () => rows().filter((tr) => !tr.hidden);
  const set = (id, value) => {
    const control = document.getElementById(id);
    control.value = value;
    control.dispatchEvent(new Event('input', {bubbles: true}));
  };
  const clickHeader = (index) => $('#matrix thead tr').cells[index].querySelector('button').click();
  // Resolves at the first of `events` on window, or after `ms` (virtual time) when none comes.
  const next = (events, ms) => new Promise((resolve) => {
    const done = (ev) => {
      for (const e of events) window.removeEventListener(e, done);
      resolve(ev ? ev.type : 'timeout');
    };
    for (const e of events) window.addEventListener(e, done);
    setTimeout(() => done(null), ms);
  });
  // The config rows the search's words select, from the data, as the page should (every word, any order, in
  // names, statuses, reasons and the notes the matrix marks cells with).
  const wordRows = (data, query) => {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    return data.configs.filter((c) => {
      const parts = [c.config, c.recipe];
      for (const cell of Object.values(c.cells)) {
        const e = cell.entry;
        const r = cell.record || {};
        parts.push(e.status, e.reason, e.device_name, e.numeric || '');
        if (r.disturbed) parts.push('disturbed', r.disturbed);
        if (e.repair) parts.push('repaired', e.repair, e.repaired_status);
        if (e.stand_in) parts.push('sample data', e.stand_in);
        if (e.proxy) parts.push('proxy proxies', e.proxy);
        if (r.ran && r.ran.proxies && r.ran.proxies.note) parts.push(r.ran.proxies.note);
      }
      const text = parts.join('\n').toLowerCase();
      return words.every((w) => text.includes(w));
    }).length;
  };
  const details = () => $('#details');
  const openedCell = () => (details().hidden ? '' :
    details().querySelector('h2').firstChild.textContent + ' ' + details().querySelector('h2 .when').textContent);

  put('window_width', window.innerWidth);
  const restoring = location.hash.length > 1;
  if (restoring) {
    try {
      put('mode', 'restore');
      put('restored_search', $('#f-search').value);
      put('restored_status', $('#f-status').value);
      put('restored_family', $('#f-family').value);
      put('restored_device', $('#f-device').value);
      put('restored_rows', shownRows().map((tr) => tr.dataset.config).join(','));
      put('restored_open', openedCell());
      put('restored_selected', document.querySelectorAll('#matrix td.cell.selected').length);
      put('restored_permalink', $('#permalink').getAttribute('href'));
      // The open cell's details: each field as "name: value", and the titles of its trend charts.
      put('restored_fields', Array.from(details().querySelectorAll('dt'))
        .map((dt) => dt.textContent + ': ' + dt.nextElementSibling.textContent).join(' | '));
      put('restored_charts', Array.from(details().querySelectorAll('svg.chart text.title'))
        .map((t) => t.textContent).join(','));
      // What ran for the cell, its output's heading and text, its proxies' rows, its commit's link; the sort.
      put('restored_ran', Array.from(details().querySelectorAll('ul.ran li')).map((li) => li.textContent).join(' | '));
      const outputTitle = Array.from(details().querySelectorAll('h3')).find((h) => h.textContent.startsWith('Last lines'));
      put('restored_output_title', outputTitle ? outputTitle.textContent : '');
      const output = outputTitle ? outputTitle.nextElementSibling : null;
      put('restored_output', output ? output.textContent : '');
      put('restored_proxy_rows', details().querySelectorAll('table.proxies tbody tr').length);
      const commit = details().querySelector('dd a.commit');
      put('restored_commit_href', commit ? commit.getAttribute('href') : '');
      const sortedBy = $('#matrix thead th[aria-sort]');
      put('restored_sort', sortedBy ? (sortedBy.dataset.device || sortedBy.dataset.sort) + ' ' +
        sortedBy.getAttribute('aria-sort') : '');
    } catch (e) {
      put('exception_restore', e && e.stack ? e.stack : e);
    }
  } else try {
    const data = JSON.parse($('#tm-data').textContent);
    put('data_configs', data.configs.length);
    put('data_devices', data.devices.length);
    put('rows', rows().length);
    put('cells_per_row', Array.from(new Set(rows().map((tr) => tr.querySelectorAll('td.cell').length))).join(','));

    const family = $('#f-family').options[1].value;
    set('f-family', family);
    put('family', family);
    put('family_rows', shownRows().length);
    put('family_rows_expected', data.configs.filter((c) => c.family === family).length);
    put('shown_text', $('#shown').textContent);
    set('f-family', '');

    set('f-status', 'runs');
    put('runs_rows', shownRows().length);
    put('runs_rows_expected',
      data.configs.filter((c) => Object.values(c.cells).some((cell) => cell.entry.status === 'runs')).length);
    set('f-status', '');

    const device = data.devices[data.devices.length - 1];
    set('f-device', device);
    put('device_cells_per_row', Array.from(new Set(shownRows().map((tr) =>
      Array.from(tr.querySelectorAll('td.cell')).filter((td) => !td.hidden).length))).join(','));
    put('device_headers', Array.from($('#matrix thead tr').cells).filter((th) => !th.hidden).length);
    set('f-device', '');

    set('f-search', 'OUT OF MEMORY');
    put('search_rows', shownRows().length);
    set('f-search', 'no config is called this');
    put('search_none_rows', shownRows().length);
    put('search_none_message', !$('#empty').hidden);
    set('f-search', '');
    put('rows_after_reset', shownRows().length);

    clickHeader(2);  // the first device column: what runs first, fastest first
    put('sort_first', rows()[0].dataset.config);
    clickHeader(2);
    put('sort_desc_first', rows()[0].dataset.config);
    put('sort_aria', $('#matrix thead tr').cells[2].getAttribute('aria-sort'));
    clickHeader(0);

    // The cell with the longest history, one that runs if there is one.
    let best = null;
    const rank = (cell) => [cell.entry.status === 'runs' ? 1 : 0, cell.history.length];
    for (const c of data.configs) {
      for (const [type, cell] of Object.entries(c.cells)) {
        const [runs, length] = rank(cell);
        if (!best || runs > best.rank[0] || (runs === best.rank[0] && length > best.rank[1])) {
          best = {config: c.config, type, cell, rank: [runs, length]};
        }
      }
    }
    const cellOf = (b) => Array.from(document.querySelectorAll('#matrix tbody td.cell')).find((td) =>
      td.closest('tr').dataset.config === b.config && td.dataset.device === b.type);
    if (best) {
      const td = cellOf(best);
      td.click();
      const details = $('#details');
      put('details_open', !details.hidden);
      put('details_config', details.querySelector('h2').firstChild.textContent);
      put('details_device', details.querySelector('h2 .when').textContent);
      put('details_status', details.querySelector('.badge').textContent);
      put('details_charts', details.querySelectorAll('svg.chart').length);
      const chart = details.querySelector('svg.chart');
      put('details_points', chart ? chart.querySelectorAll('circle[class^="pt-"]').length : 0);
      put('details_points_expected', best.cell.history.length);
      put('details_changes', chart ? chart.querySelectorAll('line.change').length : 0);
      put('details_history_rows', details.querySelectorAll('table.history tbody tr').length);
      put('details_output', Boolean(details.querySelector('pre.output')));
      put('details_fields', Array.from(details.querySelectorAll('dt')).map((dt) => dt.textContent).join(','));
      document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}));
      put('details_closed_by_escape', details.hidden);
      td.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}));
      put('details_opened_by_enter', !details.hidden);
    }
  } catch (e) {
    put('exception', e && e.stack ? e.stack : e);
  }

  if (!restoring) await driveNewerFeatures();

  async function driveNewerFeatures() {
    const data = JSON.parse($('#tm-data').textContent);

    // Words in any order, any case.
    try {
      for (const [key, query] of [['words', 'LORA tiny'], ['words_reversed', 'tiny lora'],
        ['words_none', 'tiny lora nosuchword'], ['search_disturbed', 'disturbed'], ['search_repaired', 'Repaired'],
        ['search_sample_data', 'sample data']]) {
        set('f-search', query);
        put(key + '_rows', shownRows().length);
        put(key + '_rows_expected', wordRows(data, query));
      }
      set('f-search', '');
    } catch (e) {
      put('exception_words', e && e.stack ? e.stack : e);
    }

    // The view in the URL: filters written to the fragment and to the link to copy.
    try {
      document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}));
      set('f-status', 'runs');
      set('f-search', 'tiny lora');
      put('url_hash', decodeURIComponent(location.hash));
      put('url_permalink', decodeURIComponent($('#permalink').getAttribute('href')));
      set('f-search', '');
      set('f-status', '');
      put('url_hash_reset', location.hash);
      // The sort: a heading clicked goes into the URL ("-" descending), the default leaves it; back restores it.
      clickHeader(1);
      put('sort_url', decodeURIComponent(location.hash));
      clickHeader(1);
      put('sort_url_desc', decodeURIComponent(location.hash));
      put('sort_url_first', rows()[0].dataset.config);
      const back = next(['popstate'], 300);
      history.back();
      await back;
      await next(['hashchange'], 50);
      put('sort_back', decodeURIComponent(location.hash) + ' ' + $('#matrix thead tr').cells[1].getAttribute('aria-sort'));
      clickHeader(0);
      put('sort_url_reset', location.hash);
    } catch (e) {
      put('exception_url', e && e.stack ? e.stack : e);
    }

    // The change summary: each line a link that opens its cell; then back and forward walk the views.
    try {
      const summary = $('#changes');
      if (summary) {
        const items = Array.from(summary.querySelectorAll('li'));
        put('changes_kinds', items.map((li) => li.dataset.kind).join(','));
        // Newest first; the disturbed lines folded shut under their count, the rest on show.
        put('changes_leading', items.filter((li) => !li.closest('details')).map((li) => li.dataset.kind).join(','));
        const disturbed = items.filter((li) => li.dataset.kind === 'disturbed');
        put('changes_disturbed_folded', disturbed.every((li) => li.closest('details.disturbed') &&
          !li.closest('details.disturbed').open &&
          (typeof li.checkVisibility !== 'function' || !li.checkVisibility())));
        const fold = summary.querySelector('details.disturbed summary');
        put('changes_disturbed_summary', fold ? fold.textContent : '');
        put('changes_before_table', Boolean(summary.compareDocumentPosition($('#matrix')) &
          Node.DOCUMENT_POSITION_FOLLOWING));
        const nothing = summary.querySelector('.nothing');
        put('changes_nothing', nothing ? nothing.textContent : '');
        if (items.length) {
          const li = items[0];
          const link = li.querySelector('a');
          const arrived = next(['hashchange', 'popstate'], 300);
          link.click();
          await arrived;
          put('change_link_opens', openedCell() === li.dataset.config + ' on ' + li.dataset.device);
          const closedBy = next(['popstate'], 50);
          document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}));
          await closedBy;  // closing adds a view; no event comes
          put('change_closed', details().hidden);
          const back = next(['popstate'], 300);
          history.back();
          await back;
          await next(['hashchange'], 50);
          put('back_reopens', openedCell() === li.dataset.config + ' on ' + li.dataset.device);
          const forward = next(['popstate'], 300);
          history.forward();
          await forward;
          await next(['hashchange'], 50);
          put('forward_closes', details().hidden);
        }
      }
    } catch (e) {
      put('exception_changes', e && e.stack ? e.stack : e);
    }

    // Contrast of every text on its background (WCAG AA: 4.5:1), with a details panel open.
    try {
      const rgb = (text) => (text.match(/[\d.]+/g) || []).map(Number);
      const luminance = ([r, g, b]) => {
        const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
        return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
      };
      const background = (e) => {
        for (let at = e; at; at = at.parentElement) {
          const c = rgb(getComputedStyle(at).backgroundColor);
          if (c.length >= 3 && (c.length < 4 || c[3] > 0)) return c.slice(0, 3);
        }
        return [255, 255, 255];
      };
      const open = document.querySelector('#matrix td.cell:not(.st-none)');
      if (open && details().hidden) open.click();
      const selectors = ['.legend li', 'td.cell .status', 'td.cell .measured', 'td.cell .reason',
        'td.cell .disturbed-mark', 'td.cell .stand-in', '#changes li b', '#changes a', '#changes li', '#changes .note',
        '#changes .nothing', '.lede', '.summary', '#filters label', '#shown', '#permalink', 'footer',
        '#matrix th[scope="row"]', '#matrix td.recipe', '#details .badge', '#details dt', '#details dd',
        '#details .reason', '#details .disturbed-note', '#details .when', '#details .none'];
      let worst = null;
      const failures = [];
      let measured = 0;
      for (const selector of selectors) {
        for (const e of document.querySelectorAll(selector)) {
          if (!e.getClientRects().length || !e.textContent.trim()) continue;
          const fg = rgb(getComputedStyle(e).color);
          const bg = background(e);
          const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
          const ratio = (hi + 0.05) / (lo + 0.05);
          measured++;
          const what = selector + ' ' + getComputedStyle(e).color + ' on rgb(' + bg.join(', ') + ') ' +
            ratio.toFixed(2);
          if (!worst || ratio < worst.ratio) worst = {ratio, what};
          if (ratio < 4.5 && !failures.includes(what)) failures.push(what);
        }
      }
      put('contrast_measured', measured);
      put('contrast_worst', worst ? worst.what : '');
      put('contrast_failures', failures.join(' | '));
    } catch (e) {
      put('exception_contrast', e && e.stack ? e.stack : e);
    }

    // Layout: the page itself never scrolls sideways; the first status column is on screen; the page scrolls as
    // one (nothing inside it scrolls down), the table sideways inside <main>, with its header row stuck to the
    // window's top and its first column to <main>'s left edge.
    try {
      document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}));
      const main = $('main');
      const root = document.documentElement;
      put('page_scrolls_sideways', root.scrollWidth > root.clientWidth);
      const first = rows()[0].querySelector('td.cell:not([hidden]) .status');
      const r = first.getBoundingClientRect();
      put('first_status_on_screen', r.left >= 0 && r.right <= window.innerWidth && r.width > 0);
      put('table_wider_than_main', main.scrollWidth > main.clientWidth);
      // A long table (the first row cloned 80 times) scrolled, as a reader's browser would, until its last
      // row's last cell is on screen: the window scrolled, not <main>; the header row must be at the window's
      // top, and the config names at <main>'s left edge.
      const clones = Array.from({length: 80}, () => rows()[0].cloneNode(true));
      const tbody = $('#matrix tbody');
      for (const tr of clones) tbody.append(tr);
      const cells = clones[clones.length - 1].querySelectorAll('td.cell');
      const scrolledWindow = next(['scroll'], 200);
      cells[cells.length - 1].scrollIntoView({block: 'end', inline: 'nearest'});
      await scrolledWindow;
      await new Promise((resolve) => requestAnimationFrame(resolve));
      const box = main.getBoundingClientRect();
      const head = $('#matrix thead th').getBoundingClientRect();
      const name = clones[clones.length - 1].querySelector('th[scope="row"]').getBoundingClientRect();
      put('scrolled', main.scrollTop > 0 || window.scrollY > 0);
      put('page_scrolled', window.scrollY > 0);
      put('main_scrolls_down', main.scrollHeight > main.clientHeight + 1 || main.scrollTop > 0);
      put('main_top_above_window', box.top < -100);
      put('header_sticks', Math.abs(head.top) < 2 && head.bottom <= window.innerHeight + 1);
      put('first_column_sticks', main.scrollLeft === 0 || Math.abs(name.left - (box.left + main.clientLeft)) < 2);
      for (const tr of clones) tr.remove();
      main.scrollTop = 0;
      main.scrollLeft = 0;
      window.scrollTo(0, 0);
    } catch (e) {
      put('exception_layout', e && e.stack ? e.stack : e);
    }
  }
  const errors = window.__tmErrors || ['the error collector did not run'];
  put('errors', errors.length + (errors.length ? ': ' + errors.join(' | ') : ''));
  put('resources', performance.getEntriesByType('resource').length);
  const pre = document.createElement('pre');
  pre.id = 'tm-selftest';
  pre.hidden = true;
  pre.textContent = lines.join('\n');
  document.body.append(pre);
})();
