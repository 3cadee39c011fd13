// reports/index.html's script (compiled into tune-matrix; see html_report.h). Plain browser JavaScript with
// no library and no network: the data is the inline JSON in #tm-data, the matrix is the static table.
(function () {
  'use strict';

  const SVG_NS = 'http://www.w3.org/2000/svg';

  const data = JSON.parse(document.getElementById('tm-data').textContent);
  // Per status its rank (the sort order of a device column) and whether such a cell started a child: the
  // status table of matrix/cell.cc, written on the legend's items. A cell not measured sorts last.
  const statuses = new Map(Array.from(document.querySelectorAll('.legend li[data-status]'), (li) =>
    [li.dataset.status, {rank: Number(li.dataset.rank), started: li.dataset.started === 'true'}]));
  const rankOf = (status) => (statuses.has(status) ? statuses.get(status).rank : statuses.size);
  const startedWith = (status) => statuses.has(status) && statuses.get(status).started;
  const table = document.getElementById('matrix');
  const tbody = table.tBodies[0];
  const rows = Array.from(tbody.rows);
  const panel = document.getElementById('details');
  const byConfig = new Map(data.configs.map((c) => [c.config, c]));
  const controls = {
    search: document.getElementById('f-search'),
    family: document.getElementById('f-family'),
    recipe: document.getElementById('f-recipe'),
    status: document.getElementById('f-status'),
    device: document.getElementById('f-device'),
  };

  // ---- small helpers ----------------------------------------------------------------------------------------

  // An element with attributes and children (strings become text, never markup).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c !== null && c !== undefined && c !== false) e.append(c);
    }
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function isNumber(v) {
    return typeof v === 'number' && isFinite(v);
  }

  // A number for people: 812.4 -> "812.4", 37266.1 -> "37,266"; strings ("nan") as they are.
  function fmt(v, decimals) {
    if (typeof v === 'string') return v;
    if (!isNumber(v)) return '—';
    return v.toLocaleString('en-US', {minimumFractionDigits: decimals, maximumFractionDigits: decimals});
  }

  function gib(bytes) {
    return isNumber(bytes) && bytes > 0 ? bytes / 1073741824 : null;
  }

  function seconds(v) {
    if (!isNumber(v)) return '—';
    if (v < 1) return fmt(v * 1000, 1) + ' ms';
    return fmt(v, v < 10 ? 2 : v < 100 ? 1 : 0) + ' s';
  }

  function short(commit) {
    return commit ? commit.slice(0, 12) : '—';
  }

  // A status as the page shows it: its class gives the colour, the stylesheet the symbol.
  function statusBadge(status, tag) {
    return el(tag || 'span', {class: 'badge st-' + status}, el('span', {class: 'status'}, status));
  }

  function cellsOf(tr) {
    return Array.from(tr.querySelectorAll('td.cell'));
  }

  // ---- filters and search -----------------------------------------------------------------------------------

  // What the search box matches per config: its name, recipe, and each cell's status, reason and device model.
  const searchText = new Map(data.configs.map((c) => {
    const parts = [c.config, c.recipe];
    for (const cell of Object.values(c.cells)) {
      parts.push(cell.entry.status, cell.entry.reason, cell.entry.device_name);
    }
    return [c.config, parts.join('\n').toLowerCase()];
  }));

  // The search's words: a config matches when its text holds every one, in any order ("qwen3 lora").
  function searchWords() {
    return controls.search.value.toLowerCase().split(/\s+/).filter(Boolean);
  }

  function applyFilters() {
    const words = searchWords();
    const family = controls.family.value;
    const recipe = controls.recipe.value;
    const status = controls.status.value;
    const device = controls.device.value;
    for (const e of table.querySelectorAll('[data-device]')) e.hidden = device !== '' && e.dataset.device !== device;
    let shown = 0;
    for (const tr of rows) {
      let keep = (family === '' || tr.dataset.family === family) && (recipe === '' || tr.dataset.recipe === recipe);
      if (keep && status !== '') keep = cellsOf(tr).some((td) => !td.hidden && td.dataset.status === status);
      if (keep && words.length) {
        const text = searchText.get(tr.dataset.config);
        keep = words.every((w) => text.includes(w));
      }
      tr.hidden = !keep;
      if (keep) shown++;
    }
    document.getElementById('shown').textContent = shown + ' of ' + rows.length + ' configs';
    document.getElementById('empty').hidden = shown > 0;
  }

  // ---- the view in the URL ---------------------------------------------------------------------------------

  // The filters and the open cell live in the fragment (#q=qwen3+lora&status=fails&open=<config>@<device>), so
  // a view can be linked to and reloaded, and back/forward walk through the views. Typing in the search box
  // replaces the current entry; a chosen filter, an opened or closed cell adds one.
  const URL_KEYS = {q: 'search', family: 'family', recipe: 'recipe', status: 'status', device: 'device'};
  const permalink = document.getElementById('permalink');

  function viewHash() {
    const p = new URLSearchParams();
    for (const [key, control] of Object.entries(URL_KEYS)) {
      const v = key === 'q' ? controls.search.value.trim() : controls[control].value;
      if (v) p.set(key, v);
    }
    if (opened) p.set('open', opened.closest('tr').dataset.config + '@' + opened.dataset.device);
    const text = p.toString();
    return text ? '#' + text : '';
  }

  function writeUrl(push) {
    const hash = viewHash();
    permalink.href = hash || '#';
    if (hash === location.hash || (hash === '' && (location.hash === '' || location.hash === '#'))) return;
    const url = hash || location.pathname + location.search;
    try {
      if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
    } catch (e) {
      if (push) location.hash = hash;  // a browser that refuses history calls on file:// pages
    }
  }

  function cellAt(config, device) {
    const tr = rows.find((r) => r.dataset.config === config);
    return tr ? tr.querySelector('td.cell[data-device="' + CSS.escape(device) + '"]') : null;
  }

  // Sets the controls and the open cell from the URL's fragment.
  function readUrl() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ''));
    for (const [key, control] of Object.entries(URL_KEYS)) {
      const v = p.get(key) || '';
      const c = controls[control];
      // A value a select does not offer (a renamed family) is left at "all".
      c.value = v;
      if (c.value !== v) c.value = '';
    }
    applyFilters();
    const open = p.get('open') || '';
    const at = open.lastIndexOf('@');
    const td = at > 0 ? cellAt(open.slice(0, at), open.slice(at + 1)) : null;
    if (td && td.dataset.status !== 'none') openCell(td, false);
    else if (!panel.hidden) closeDetails(false);
    permalink.href = viewHash() || '#';
  }

  for (const c of Object.values(controls)) {
    c.addEventListener('input', () => { applyFilters(); writeUrl(c !== controls.search); });
    c.addEventListener('change', () => { applyFilters(); writeUrl(c !== controls.search); });
  }
  document.getElementById('filters').addEventListener('submit', (ev) => ev.preventDefault());
  window.addEventListener('popstate', readUrl);
  window.addEventListener('hashchange', readUrl);
  document.getElementById('copy-link').addEventListener('click', (ev) => {
    const button = ev.currentTarget;
    const done = (text) => {
      button.textContent = text;
      setTimeout(() => { button.textContent = 'copy link'; }, 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(location.href).then(() => done('copied'), () => done('copy the address bar'));
    } else {
      done('copy the address bar');
    }
  });

  // ---- sorting ----------------------------------------------------------------------------------------------

  let sorted = {th: table.tHead.rows[0].cells[0], direction: 1};

  function compareRows(th) {
    const byName = (a, b) => a.dataset.config.localeCompare(b.dataset.config);
    if (th.dataset.sort === 'recipe') {
      return (a, b) => a.dataset.recipe.localeCompare(b.dataset.recipe) || byName(a, b);
    }
    if (th.dataset.sort === 'device') {
      const device = th.dataset.device;
      const cell = (tr) => tr.querySelector('td.cell[data-device="' + CSS.escape(device) + '"]');
      return (a, b) => {
        const x = cell(a);
        const y = cell(b);
        const rank = rankOf(x.dataset.status) - rankOf(y.dataset.status);
        const speed = Number(y.dataset.tps || 0) - Number(x.dataset.tps || 0);
        return rank || speed || byName(a, b);
      };
    }
    return byName;
  }

  function sortBy(th) {
    const direction = sorted.th === th ? -sorted.direction : 1;
    const compare = compareRows(th);
    rows.sort((a, b) => direction * compare(a, b));
    for (const tr of rows) tbody.appendChild(tr);
    for (const h of table.tHead.rows[0].cells) h.removeAttribute('aria-sort');
    th.setAttribute('aria-sort', direction > 0 ? 'ascending' : 'descending');
    sorted = {th, direction};
  }

  for (const th of table.tHead.rows[0].cells) {
    th.querySelector('button').addEventListener('click', () => sortBy(th));
  }

  // ---- trend charts -----------------------------------------------------------------------------------------

  // A measure over a cell's history as an inline SVG: a point per measurement in time order, coloured by
  // status (a measurement without a value sits on the axis), a line through the measured values, an optional
  // dashed reference line (the predicted peak memory), and a dashed red line where the status changed.
  //   measure: (point) -> value, counted only where the cell ran
  //   reference: (point) -> value or null, e.g. the prediction, which exists whether or not the cell ran
  function chart(points, title, unit, decimals, measure, reference) {
    const W = 560;
    const H = 150;
    const L = 52;
    const R = 16;
    const T = 22;
    const B = 30;
    const values = points.map((p) => (p.status === 'runs' && isNumber(measure(p)) ? measure(p) : null));
    const refs = points.map((p) => (reference && isNumber(reference(p)) && reference(p) > 0 ? reference(p) : null));
    const measured = values.concat(refs).filter((v) => v !== null);
    const box = svg('svg', {class: 'chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img',
      'aria-label': title + ' over ' + points.length + ' measurements'});
    box.append(svg('text', {class: 'title', x: L, y: 14}, title));
    if (refs.some((v) => v !== null)) {
      box.append(svg('text', {class: 'legend', x: W - R, y: 14, 'text-anchor': 'end'}, '– – predicted   —— measured'));
    }
    // The axis starts at 0 unless every value is in the upper half of the range, where it zooms in so that a
    // change of a few percent shows; its bounds are labelled either way.
    const hi = measured.length ? Math.max(...measured) : 1;
    const low = measured.length ? Math.min(...measured) : 0;
    const lo = measured.length > 1 && low > hi / 2 && low < hi ? Math.max(0, low - (hi - low)) : 0;
    const top = hi > lo ? hi + (hi - lo) * 0.15 : 1;
    const x = (i) => (points.length === 1 ? (L + W - R) / 2 : L + (i * (W - L - R)) / (points.length - 1));
    const y = (v) => T + (H - T - B) * (1 - (v - lo) / (top - lo));
    for (const v of measured.length ? [lo, hi] : [0]) {
      box.append(svg('line', {class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v)}));
      box.append(svg('text', {x: L - 6, y: y(v) + 3, 'text-anchor': 'end'}, fmt(v, v >= 100 || v === 0 ? 0 : decimals)));
    }
    if (!measured.length) {
      box.append(svg('text', {x: (L + W - R) / 2, y: T + (H - T - B) / 2, 'text-anchor': 'middle'},
        'no value: the cell did not run in any recorded measurement'));
    }
    for (let i = 1; i < points.length; i++) {
      if (points[i].status === points[i - 1].status) continue;
      const cx = (x(i - 1) + x(i)) / 2;
      box.append(svg('line', {class: 'change', x1: cx, x2: cx, y1: T - 4, y2: H - B}));
      box.append(svg('text', {class: 'change-label', x: cx + 3, y: T + 6}, points[i - 1].status + '→' + points[i].status));
    }
    const line = (series, cls) => {
      let d = '';
      series.forEach((v, i) => {
        if (v !== null) d += (d && series[i - 1] !== null ? ' L' : ' M') + x(i).toFixed(1) + ' ' + y(v).toFixed(1);
      });
      if (d) box.append(svg('path', {class: cls, d: d.trim()}));
    };
    line(refs, 'reference');
    line(values, 'line');
    refs.forEach((v, i) => {
      if (v !== null) box.append(svg('circle', {class: 'reference', cx: x(i), cy: y(v), r: 2}));
    });
    // A measurement without a value is a hollow point on the axis.
    points.forEach((p, i) => {
      const v = values[i];
      const dot = svg('circle', {class: 'pt-' + p.status + (v === null ? ' none' : ''), cx: x(i),
        cy: y(v === null ? lo : v), r: v === null ? 3.5 : 4});
      dot.append(svg('title', {}, p.verified_at + ' · ' + short(p.commit) + ' · ' + p.status +
        (v === null ? '' : ' · ' + fmt(v, decimals) + ' ' + unit) +
        (refs[i] === null ? '' : ' · predicted ' + fmt(refs[i], decimals) + ' ' + unit)));
      box.append(dot);
    });
    const label = (i, anchor) => box.append(svg('text', {x: x(i), y: H - 10, 'text-anchor': anchor},
      points[i].verified_at.slice(0, 10) + ' ' + short(points[i].commit).slice(0, 7)));
    label(0, points.length === 1 ? 'middle' : 'start');
    if (points.length > 1) label(points.length - 1, 'end');
    return box;
  }

  // ---- the details panel ------------------------------------------------------------------------------------

  let opened = null;  // the cell whose details are shown

  function field(dl, name, value) {
    dl.append(el('dt', {}, name), el('dd', {}, value));
  }

  function memoryText(entry, record) {
    const measured = entry.peak_memory_gib;
    const predicted = record ? gib(record.predicted_memory_bytes) : null;
    const total = record ? gib(record.device_memory_bytes) : null;
    let text = (isNumber(predicted) ? fmt(predicted, 2) + ' GiB predicted' : 'prediction not recorded') + ' · ' +
      (isNumber(measured) ? fmt(measured, 2) + ' GiB measured' : 'not measured');
    if (isNumber(predicted) && isNumber(measured) && predicted > 0) {
      text += ' (' + fmt((100 * measured) / predicted, 0) + '% of the prediction)';
    }
    if (isNumber(total)) text += ' · device has ' + fmt(total, 2) + ' GiB';
    return text;
  }

  function exitText(record) {
    if (record && isNumber(record.term_signal)) return 'killed by signal ' + record.term_signal;
    if (record && isNumber(record.exit_code)) return 'exit code ' + record.exit_code;
    return 'not recorded';
  }

  function historyTable(points) {
    const head = el('tr', {}, ...['verified (UTC)', 'commit', 'device', 'status', 'tok/s', 'peak GiB', 'host · job']
      .map((h) => el('th', {}, h)));
    const body = points.slice().reverse().map((p) => el('tr', {title: p.reason || null},
      el('td', {}, p.verified_at.replace('T', ' ').replace('Z', '')),
      el('td', {class: 'mono', title: p.commit || null}, short(p.commit).slice(0, 7)),
      el('td', {}, p.device),
      el('td', {class: 'st-' + p.status}, el('span', {class: 'status'}, p.status)),
      el('td', {class: 'num'}, p.status === 'runs' ? fmt(p.tokens_per_second, 1) : ''),
      el('td', {class: 'num'}, p.status === 'runs' ? fmt(p.peak_memory_gib, 3) : ''),
      el('td', {}, [p.host, p.job].filter(Boolean).join(' · '))));
    return el('table', {class: 'history'}, el('thead', {}, head), el('tbody', {}, ...body));
  }

  // Opens `td`'s details; `push` (default true) adds the view to the browser's history.
  function openCell(td, push) {
    const config = byConfig.get(td.closest('tr').dataset.config);
    const device = td.dataset.device;
    const cell = config && config.cells[device];
    if (!cell) return;
    const {entry, record, history} = cell;
    if (opened) opened.classList.remove('selected');
    opened = td;
    td.classList.add('selected');

    const close = el('button', {type: 'button', class: 'close', title: 'close (Esc)', 'aria-label': 'close'}, '×');
    close.addEventListener('click', () => closeDetails());
    // Measurements a cell that never started does not have are left out rather than shown empty.
    const dl = el('dl');
    const started = startedWith(entry.status);
    // A generation cell (one with a time to first token): its tokens/s is its decode speed, then its prefill.
    const generation = isNumber(entry.time_to_first_token_s);
    if (isNumber(entry.tokens_per_second)) {
      field(dl, generation ? 'decode tokens/s' : 'tokens/s', fmt(entry.tokens_per_second, 1));
    }
    if (generation) field(dl, 'time to first token', seconds(entry.time_to_first_token_s));
    // The steps' model FLOP rate and its share of the device's measured matmul peak (a proxied cell's: ≈).
    const peakOf = entry.peak_dtype ? 'the ' + entry.peak_dtype + ' peak' : 'peak';
    if (isNumber(entry.peak_share) || isNumber(entry.gflops_per_second)) {
      field(dl, 'FLOP rate', (isNumber(entry.gflops_per_second) ? fmt(entry.gflops_per_second, 1) + ' GFLOP/s' : '') +
        (isNumber(entry.peak_share) ? ', ' + fmt(100 * entry.peak_share, 1) + '% of ' + peakOf : ''));
    }
    if (isNumber(entry.extrapolated_peak_share)) {
      field(dl, 'share of peak', '≈' + fmt(100 * entry.extrapolated_peak_share, 1) + '% of ' + peakOf + ' (extrapolated)');
    } else if (isNumber(entry.proxy_peak_share)) {
      field(dl, 'share of peak', fmt(100 * entry.proxy_peak_share, 1) + '% of ' + peakOf + ' at proxy size (its deepest proxy; nothing extrapolated)');
    }
    // The numeric check: the first step against its float32 reference.
    if (entry.numeric) field(dl, 'numbers', entry.numeric);
    // A repaired cell (invalid as written): the overrides it ran with and what they got.
    if (entry.repair) {
      field(dl, 'repaired', el('span', {}, entry.repaired_status + ' with ', el('span', {class: 'mono'}, entry.repair)));
    }
    // A proxied cell: its proxies, and the real depth's numbers extrapolated from theirs.
    if (entry.proxy) {
      const about = [isNumber(entry.extrapolated_tokens_per_second) ? '≈' + fmt(entry.extrapolated_tokens_per_second, 1) + ' tok/s' : '',
        isNumber(entry.extrapolated_peak_memory_gib) ? '≈' + fmt(entry.extrapolated_peak_memory_gib, 2) + ' GiB' : '']
        .filter(Boolean).join(' · ');
      field(dl, 'proxies', entry.proxy + (entry.ops_verified === 'yes' ? '; ops verified' : '') + (about ? '; ' + about : ''));
    }
    if (isNumber(entry.prefill_tokens_per_second)) {
      field(dl, 'prefill tokens/s', fmt(entry.prefill_tokens_per_second, 1));
    }
    if (isNumber(entry.step_time_s)) {
      field(dl, 'step time', seconds(entry.step_time_s) +
        (isNumber(entry.step_time_spread_s) ? ' ± ' + seconds(entry.step_time_spread_s) + ' (median ± MAD)' : ''));
    }
    // Named as SUPPORT.md names it (PeakMemoryMeaning in matrix/report.cc).
    const peakMeaning = (data.peak_memory || {})[device];
    if (isNumber(entry.peak_memory_gib)) {
      field(dl, 'peak memory', fmt(entry.peak_memory_gib, 3) + ' GiB' + (peakMeaning ? ' (' + peakMeaning + ')' : ''));
    }
    if (record && record.disturbed) {
      const share = (v) => (isNumber(v) ? fmt(100 * v, 0) + '%' : '—');
      field(dl, 'disturbed', el('span', {class: 'disturbed-note'}, '⚠ measured beside other work: ' +
        record.disturbed + ' (other processes ' + share(record.others_cpu_share) + ' of the CPU, steal ' +
        share(record.steal_share) + '); its speed is not published'));
    }
    field(dl, 'predicted vs measured', memoryText(entry, record));
    if (record && (isNumber(record.first_loss) || typeof record.first_loss === 'string')) {
      field(dl, 'loss', fmt(record.first_loss, 4) + ' → ' + fmt(record.last_loss, 4));
    }
    if (isNumber(entry.wall_time_s)) field(dl, 'cell wall time', seconds(entry.wall_time_s));
    field(dl, 'ended', started ? exitText(record) : 'not started: ' + entry.status);
    field(dl, 'device', (entry.device_name || '—') + (record ? ' (' + record.device + ')' : ''));
    field(dl, 'torch', entry.torch_version || '—');
    field(dl, 'host', entry.host || '—');
    field(dl, 'job', entry.job || 'local run');
    field(dl, 'commit', el('span', {class: 'mono', title: entry.commit || null}, entry.commit || '—'));
    field(dl, 'verified', entry.verified_at ? entry.verified_at.replace('T', ' ').replace('Z', ' UTC') : '—');
    field(dl, 'config hash', el('span', {class: 'mono'}, entry.config_hash || '—'));
    field(dl, 'sample data', entry.stand_in ? 'yes: ' + entry.stand_in : 'none recorded');

    const tail = record && record.output_tail ? record.output_tail.replace(/\s+$/, '') : '';
    const output = tail ? el('pre', {class: 'output'}, tail.split('\n').slice(-20).join('\n'))
      : el('p', {class: 'none'}, !record ? 'Not recorded: this entry\'s measurement is not in reports/history.'
        : started ? 'The cell printed nothing.' : 'None: the cell was not started (' + entry.status + ').');

    const measuredFirstToken = history.some((p) => isNumber(p.time_to_first_token_s));
    const trends = history.length
      ? [chart(history, generation ? 'decode tokens/s' : 'tokens/s', 'tok/s', 1, (p) => p.tokens_per_second),
        measuredFirstToken
          ? chart(history, 'time to first token (ms)', 'ms', 1,
            (p) => (isNumber(p.time_to_first_token_s) ? 1000 * p.time_to_first_token_s : null))
          : null,
        chart(history, 'peak memory (GiB)', 'GiB', 2, (p) => p.peak_memory_gib, (p) => p.predicted_memory_gib),
        historyTable(history)]
      : [el('p', {class: 'none'}, 'No measurements in reports/history for this cell yet.')];

    panel.replaceChildren(...[close,
      el('h2', {}, config.config, el('span', {class: 'when'}, 'on ' + device)),
      el('div', {}, statusBadge(entry.status), el('span', {class: 'when'}, config.recipe)),
      entry.reason ? el('p', {class: 'reason st-' + entry.status}, entry.reason) : null,
      dl,
      el('h3', {}, 'Last lines of output'), output,
      el('h3', {}, 'Trends (' + history.length + ' measurement' + (history.length === 1 ? '' : 's') + ')'),
      ...trends].filter(Boolean));
    panel.hidden = false;
    const pre = panel.querySelector('pre.output');
    if (pre) pre.scrollTop = pre.scrollHeight;
    close.focus();
    if (push !== false) writeUrl(true);
  }

  function closeDetails(push) {
    panel.hidden = true;
    if (opened) {
      opened.classList.remove('selected');
      opened.focus();
      opened = null;
    }
    if (push !== false) writeUrl(true);
  }

  tbody.addEventListener('click', (ev) => {
    const td = ev.target.closest('td.cell');
    if (td && td.dataset.status !== 'none') openCell(td);
  });
  tbody.addEventListener('keydown', (ev) => {
    const td = ev.target.closest('td.cell');
    if (td && td.dataset.status !== 'none' && (ev.key === 'Enter' || ev.key === ' ')) {
      ev.preventDefault();
      openCell(td);
    }
  });
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && !panel.hidden) closeDetails();
  });

  readUrl();
})();
