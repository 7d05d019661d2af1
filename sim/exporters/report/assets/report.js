// servesim report page script (inlined into report.html by sim/exporters/report/report_html.cpp):
// draws every chart of the embedded data with Chart.js, lists the omitted ones and the tables, then
// writes a self-check (each chart's drawn pixels and data points, any error) into #selfcheck, which
// tests/report_chromium.sh reads from headless Chromium.
(function () {
  'use strict';
  var check = window.__servesimCheck || { errors: [] };
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var main = document.getElementById('charts');
  var results = [];
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  (data.tables || []).forEach(function (t) {
    var sec = el('section', 'table');
    sec.appendChild(el('h2', null, t.title));
    var table = el('table');
    t.rows.forEach(function (row, i) {
      var tr = el('tr');
      row.forEach(function (c) { tr.appendChild(el(i === 0 ? 'th' : 'td', null, c)); });
      table.appendChild(tr);
    });
    sec.appendChild(table);
    main.appendChild(sec);
  });
  data.charts.forEach(function (c) {
    var sec = el('section', 'chart');
    sec.appendChild(el('h2', null, c.title));
    var canvas = el('canvas');
    canvas.id = 'chart-' + c.id;
    canvas.width = 1000;
    canvas.height = 440;
    canvas.style.width = '1000px';
    canvas.style.height = '440px';
    sec.appendChild(canvas);
    if (c.caption) sec.appendChild(el('p', 'caption', c.caption));
    main.appendChild(sec);
    var r = { id: c.id, drawn: false, painted: 0, points: 0 };
    try {
      var chart = new Chart(canvas, c.config);
      chart.data.datasets.forEach(function (d) {
        d.data.forEach(function (v) { if (v !== null && v !== undefined) r.points++; });
      });
      var px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      for (var k = 3; k < px.length; k += 4) if (px[k] !== 0) r.painted++;
      r.drawn = r.painted > 0 && r.points > 0;
    } catch (e) {
      check.errors.push('chart ' + c.id + ': ' + e);
    }
    results.push(r);
  });
  var om = document.getElementById('omitted');
  (data.omitted || []).forEach(function (o) {
    var li = el('li');
    li.appendChild(el('b', null, o.title + ': '));
    li.appendChild(document.createTextNode(o.why));
    om.appendChild(li);
  });
  if (!(data.omitted || []).length) om.appendChild(el('li', null, 'none'));
  document.getElementById('selfcheck').textContent =
    JSON.stringify({ expected: data.charts.length, charts: results, errors: check.errors });
})();
