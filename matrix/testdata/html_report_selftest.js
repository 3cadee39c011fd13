// Injected by html_report_browser_test before </body> of a copy of the page, after the page's own script:
// drives the page as a reader would (filters, search, sorting, opening a cell) and writes what it saw into
// a hidden <pre id="tm-selftest">, one "key=value" line each, which the test reads from Chromium's
// --dump-dom. Expectations the test cannot know for an arbitrary page (the committed one) are computed here
// from the page's own data and written beside what the DOM showed ("..._expected"). It ends with the
// richest cell's details open, for the screenshot.
(function () {
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

  try {
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
  const errors = window.__tmErrors || ['the error collector did not run'];
  put('errors', errors.length + (errors.length ? ': ' + errors.join(' | ') : ''));
  put('resources', performance.getEntriesByType('resource').length);
  const pre = document.createElement('pre');
  pre.id = 'tm-selftest';
  pre.hidden = true;
  pre.textContent = lines.join('\n');
  document.body.append(pre);
})();
