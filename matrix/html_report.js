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

  // A commit as a link to the repository's page of it where the page names the repository (data.repository,
  // `tune-matrix report --repo-url` or the checkout's origin remote), else as text; `text` is what it shows.
  function commitLink(commit, text) {
    const repository = typeof data.repository === 'string' ? data.repository : '';
    if (commit && /^https?:\/\/[^\s"<>]+$/.test(repository) && /^[0-9a-f]{7,64}$/.test(commit)) {
      return el('a', {class: 'mono commit', href: repository + '/commit/' + commit, title: commit}, text);
    }
    return el('span', {class: 'mono', title: commit || null}, text);
  }

  // A status as the page shows it: its class gives the colour, the stylesheet the symbol.
  function statusBadge(status, tag) {
    return el(tag || 'span', {class: 'badge st-' + status}, el('span', {class: 'status'}, status));
  }

  function cellsOf(tr) {
    return Array.from(tr.querySelectorAll('td.cell'));
  }

  // ---- filters and search -----------------------------------------------------------------------------------

  // What the search box matches in a cell: its status, reason and device model, and the words the matrix marks
  // it with (disturbed, repaired, sample data, proxy) with their notes.
  function cellSearchParts(cell) {
    const e = cell.entry;
    const r = cell.record || {};
    const ran = r.ran || {};
    const parts = [e.status, e.reason, e.device_name, e.numeric];
    if (r.disturbed) parts.push('disturbed', r.disturbed);
    if (e.repair) parts.push('repaired', e.repair, e.repaired_status);
    if (e.stand_in) parts.push('sample data', e.stand_in);
    if (e.proxy) parts.push('proxy proxies', e.proxy);
    if (ran.proxies && ran.proxies.note) parts.push(ran.proxies.note);
    return parts.filter(Boolean);
  }

  // What the search box matches per config: its name, recipe, and each cell's parts (cellSearchParts).
  const searchText = new Map(data.configs.map((c) => {
    const parts = [c.config, c.recipe];
    for (const cell of Object.values(c.cells)) parts.push(...cellSearchParts(cell));
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
    stickHeader();
  }

  // ---- the header row sticks to the window -------------------------------------------------------------------

  // The page scrolls as one. The table scrolls sideways inside <main>, which makes <main> the scroller its
  // sticky header row would stick to, so the row is moved down by hand as the window scrolls past the table's
  // top (never below its last row); its config names stick to <main>'s left edge by CSS.
  function stickHeader() {
    const box = table.getBoundingClientRect();
    const head = table.tHead.getBoundingClientRect().height;
    const shift = Math.max(0, Math.min(-box.top, box.height - head));
    table.style.setProperty('--head-shift', shift.toFixed(1) + 'px');
  }
  window.addEventListener('scroll', stickHeader, {passive: true});
  window.addEventListener('resize', stickHeader);

  // ---- the view in the URL ---------------------------------------------------------------------------------

  // The filters, the sort and the open cell live in the fragment (#q=qwen3+lora&status=fails&sort=-recipe&
  // open=<config>@<device>), so a view can be linked to and reloaded, and back/forward walk through the views.
  // Typing in the search box replaces the current entry; a chosen filter or sort, an opened or closed cell adds
  // one. The sort is a column's key (config, recipe or a device column), "-" first when descending; the
  // default, config ascending, is left out.
  const URL_KEYS = {q: 'search', family: 'family', recipe: 'recipe', status: 'status', device: 'device'};
  const permalink = document.getElementById('permalink');

  function viewHash() {
    const p = new URLSearchParams();
    for (const [key, control] of Object.entries(URL_KEYS)) {
      const v = key === 'q' ? controls.search.value.trim() : controls[control].value;
      if (v) p.set(key, v);
    }
    if (sorted.th !== headers[0] || sorted.direction !== 1) {
      p.set('sort', (sorted.direction < 0 ? '-' : '') + sortKey(sorted.th));
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
    const sort = p.get('sort') || '';
    const key = sort.replace(/^-/, '');
    const th = headers.find((h) => sortKey(h) === key);
    sortTo(th || headers[0], th && sort.startsWith('-') ? -1 : 1);
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

  const headers = Array.from(table.tHead.rows[0].cells);
  let sorted = {th: headers[0], direction: 1};

  // A column's key in the URL: its device column, else "config" or "recipe".
  function sortKey(th) {
    return th.dataset.device || th.dataset.sort;
  }

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

  function sortTo(th, direction) {
    const compare = compareRows(th);
    rows.sort((a, b) => direction * compare(a, b));
    for (const tr of rows) tbody.appendChild(tr);
    for (const h of headers) h.removeAttribute('aria-sort');
    th.setAttribute('aria-sort', direction > 0 ? 'ascending' : 'descending');
    sorted = {th, direction};
  }

  // A heading clicked: its column ascending, or the other way when it is already the sort.
  function sortBy(th) {
    sortTo(th, sorted.th === th ? -sorted.direction : 1);
    writeUrl(true);
  }

  for (const th of headers) {
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
      el('td', {}, commitLink(p.commit, short(p.commit).slice(0, 7))),
      el('td', {}, p.device),
      el('td', {class: 'st-' + p.status}, el('span', {class: 'status'}, p.status)),
      el('td', {class: 'num'}, p.status === 'runs' ? fmt(p.tokens_per_second, 1) : ''),
      el('td', {class: 'num'}, p.status === 'runs' ? fmt(p.peak_memory_gib, 3) : ''),
      el('td', {}, [p.host, p.job].filter(Boolean).join(' · '))));
    return el('table', {class: 'history'}, el('thead', {}, head), el('tbody', {}, ...body));
  }

  // What ran for a cell besides the config as written (the record's `ran`): its proxies, and whether they were
  // cut from a config that did not start.
  function ranOf(entry, record) {
    const ran = (record && record.ran) || {};
    return {ran, proxied: Boolean(entry.proxy) || Boolean(ran.proxies && ran.proxies.ran.length)};
  }

  // How the cell ended, saying what ran where the config as written did not: the repaired config, its proxies.
  function endedText(entry, record) {
    const {proxied} = ranOf(entry, record);
    if (entry.repair) {
      return startedWith(entry.repaired_status) ? exitText(record) + ' (the repaired config\'s run)'
        : 'the repaired config did not start: ' + entry.repaired_status + (proxied ? '; its proxies ran' : '');
    }
    if (proxied) {
      return startedWith(entry.status) ? exitText(record) + ' (a proxy of the config)'
        : 'the config as written did not start (' + entry.status + '); its proxies ran';
    }
    return startedWith(entry.status) ? exitText(record) : 'not started: ' + entry.status;
  }

  // The proxies' numbers, one row per depth, then the real depth's extrapolated from them.
  function proxyTable(entry, proxies) {
    const vocab = proxies.ran.some((p) => isNumber(p.vocab) && p.vocab > 0);
    const head = el('tr', {}, ...['proxy', 'step time', 'tok/s', 'peak GiB'].map((h) => el('th', {}, h)));
    const depth = (layers, ids) => layers + ' layer' + (layers === 1 ? '' : 's') +
      (vocab && isNumber(ids) && ids > 0 ? ', ' + fmt(ids, 0) + ' ids' : '');
    const body = proxies.ran.map((p) => el('tr', {},
      el('td', {}, depth(p.layers, p.vocab)),
      el('td', {class: 'num'}, seconds(p.step_time_s)),
      el('td', {class: 'num'}, fmt(p.tokens_per_second, 1)),
      el('td', {class: 'num'}, fmt(p.peak_memory_gib, 3))));
    if (isNumber(entry.extrapolated_step_time_s) || isNumber(entry.extrapolated_peak_memory_gib)) {
      body.push(el('tr', {class: 'extrapolated'},
        el('td', {}, '≈ ' + depth(proxies.real_layers, proxies.real_vocab) + ' (extrapolated)'),
        el('td', {class: 'num'}, seconds(entry.extrapolated_step_time_s)),
        el('td', {class: 'num'}, fmt(entry.extrapolated_tokens_per_second, 1)),
        el('td', {class: 'num'}, fmt(entry.extrapolated_peak_memory_gib, 3))));
    }
    return el('table', {class: 'proxies'}, el('thead', {}, head), el('tbody', {}, ...body));
  }

  // "What ran": the repair, the proxies (with their numbers) and the float32 reference run; nothing for a
  // cell that ran as written alone.
  function whatRan(entry, record) {
    const {ran, proxied} = ranOf(entry, record);
    const items = [];
    if (entry.repair) {
      items.push(el('li', {}, 'As written: ' + entry.status + ' here. Repaired with ',
        el('span', {class: 'mono'}, entry.repair), ': ' + (entry.repaired_status || 'not recorded') + '.'));
    }
    const proxies = ran.proxies;
    if (proxied) {
      const verified = proxies && proxies.ops_verified === true ? '; every operation of the config ran' : '';
      const note = proxies && proxies.note ? '; ' + proxies.note : '';
      items.push(el('li', {}, 'Proxies' + (entry.proxy ? ' of ' + entry.proxy : '') + ' ran in its place' +
        verified + note + '.'));
    } else if (proxies && proxies.note) {
      items.push(el('li', {}, 'No proxy measured: ' + proxies.note + '.'));
    }
    const ref = ran.reference;
    if (ref) {
      items.push(el('li', {}, 'Float32 reference run' + (isNumber(ref.time_s) ? ' (' + seconds(ref.time_s) + ')' : '') +
        ': ' + (ref.note || 'no comparison recorded') + '.'));
    }
    if (!items.length) return [];
    return [el('h3', {}, 'What ran'), el('ul', {class: 'ran'}, ...items),
      proxies && proxies.ran.length ? proxyTable(entry, proxies) : null].filter(Boolean);
  }

  // The recorded output, saying whose it is; where there is none, why (never "not started" for a cell whose
  // proxies or repair ran).
  function outputSection(entry, record) {
    const {proxied} = ranOf(entry, record);
    const whose = entry.repair ? ' (the repaired config\'s run)' : proxied ? ' (its proxies\')' : '';
    const tail = record && record.output_tail ? record.output_tail.replace(/\s+$/, '') : '';
    const title = el('h3', {}, 'Last lines of output' + whose);
    if (tail) return [title, el('pre', {class: 'output'}, tail.split('\n').slice(-20).join('\n'))];
    let none;
    if (!record) {
      none = 'Not recorded: this entry\'s measurement is not in reports/history.';
    } else if (entry.repair) {
      none = startedWith(entry.repaired_status) ? 'The repaired config\'s run printed nothing that was kept.'
        : 'None: the repaired config did not start (' + entry.repaired_status + ').';
    } else if (proxied) {
      none = 'Its proxies ran; this record keeps no output of theirs (records made before the proxies\' output ' +
        'was kept hold only a failing proxy\'s).';
    } else {
      none = startedWith(entry.status) ? 'The cell printed nothing.' : 'None: the cell was not started (' + entry.status + ').';
    }
    return [title, el('p', {class: 'none'}, none)];
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
    // A generation's decode against the memory bandwidth, its prefill against the matmul peak.
    if (isNumber(entry.bandwidth_share)) field(dl, 'share of bandwidth', fmt(100 * entry.bandwidth_share, 1) + '% of the memory bandwidth');
    if (isNumber(entry.prefill_peak_share)) field(dl, 'prefill share of peak', fmt(100 * entry.prefill_peak_share, 1) + '% of ' + peakOf);
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
    field(dl, 'ended', endedText(entry, record));
    field(dl, 'device', (entry.device_name || '—') + (record ? ' (' + record.device + ')' : ''));
    field(dl, 'torch', entry.torch_version || '—');
    field(dl, 'host', entry.host || '—');
    field(dl, 'job', entry.job || 'local run');
    field(dl, 'commit', commitLink(entry.commit, entry.commit || '—'));
    field(dl, 'verified', entry.verified_at ? entry.verified_at.replace('T', ' ').replace('Z', ' UTC') : '—');
    field(dl, 'config hash', el('span', {class: 'mono'}, entry.config_hash || '—'));
    field(dl, 'sample data', entry.stand_in ? 'yes: ' + entry.stand_in : 'none recorded');


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
      ...whatRan(entry, record),
      ...outputSection(entry, record),
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
