(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("mmh-data").textContent);
  var GIB = 1073741824, MIB = 1048576;
  var records = data.records;
  var table = document.getElementById("checks");
  var tbody = table.tBodies[0];
  var text = document.getElementById("f-text");
  var verdict = document.getElementById("f-verdict");
  var family = document.getElementById("f-family");
  var shown = document.getElementById("f-shown");
  var more = document.getElementById("f-more");
  // The table holds one page of rows at a time, so a run of thousands of
  // checks opens as fast as one of fifty; filter and sort cover them all.
  var PAGE = 100, limit = PAGE, opened = {};
  var order = records.map(function (r, i) { return i; });

  // Each check's detail (its HTML, rendered and escaped by the report, and
  // its chart's data) arrives gzipped in one blob; it is inflated the first
  // time a detail is shown, so opening the page never waits for it.
  function inflate(base64) {
    var bytes = Uint8Array.from(atob(base64), function (c) { return c.charCodeAt(0); });
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip")));
  }
  var detailsPromise = null;
  function details() {
    if (!detailsPromise) detailsPromise = inflate(data.details).text().then(JSON.parse);
    return detailsPromise;
  }

  // One entry per column: what the cell shows and what it sorts by.
  var COLUMNS = [
    // The family column names the file: the check column shows the test
    // and its parameters, which a narrow cell would otherwise cut off.
    { cls: "id", show: function (r) { return r.id.split("::").slice(1).join("::") || r.id; },
      key: function (r) { return r.id; } },
    { show: function (r) { return r.family; }, key: function (r) { return r.family; } },
    { verdict: true, key: function (r) { return r.triage; } },
    { show: function (r) { return r.cause || ""; }, key: function (r) { return r.cause || ""; } },
    { show: function (r) { return r.model || ""; }, key: function (r) { return r.model || ""; } },
    { show: function (r) { return (r.total || 0).toFixed(1); }, key: function (r) { return r.total || 0; } },
    { show: function (r) { return r.peak === undefined ? "" : gib(r.peak); },
      title: function (r) { return r.peak === undefined ? "" : gib(r.peak) + " on " + r.peak_name; },
      key: function (r) { return r.peak === undefined ? -1 : r.peak; } },
    { show: function (r) { return !r.since_runs ? "" : r.since_runs === 1 ? "new" : r.since_runs + " runs"; },
      title: function (r) { return r.since || ""; },
      key: function (r) { return r.since_runs || 0; } }
  ];

  function el(tag, cls, content) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (content !== undefined && content !== null) node.textContent = content;
    return node;
  }

  function rowOf(i) {
    var r = records[i], tr = el("tr", "row");
    tr.id = "row-" + i;
    tr.dataset.i = i;
    COLUMNS.forEach(function (c) {
      var td = el("td", c.cls);
      if (c.verdict) {
        td.appendChild(el("span", "verdict " + r.verdict.replace(" ", "-"), r.verdict));
        if (r.caveat) td.appendChild(el("span", "caveat", " " + r.caveat));
      } else if (c.cls === "id" && r.article !== undefined) {
        var a = el("a", null, c.show(r));
        a.href = "#check-" + r.article;
        td.appendChild(a);
      } else {
        td.textContent = c.show(r);
      }
      if (c.cls === "id") td.title = r.id;
      if (c.title) td.title = c.title(r);
      tr.appendChild(td);
    });
    return tr;
  }

  function detailRowOf(i) {
    var tr = el("tr", "detail"), td = el("td");
    td.colSpan = COLUMNS.length;
    tr.appendChild(td);
    td.textContent = "loading…";
    details().then(function (all) {
      // Rendered by the report's autoescaping templates: engine output and
      // logs in it are text already, the same HTML "Failures in detail" holds.
      td.innerHTML = all[i].html;
      drawCharts(td.querySelectorAll("div.chart[data-i]"), all);
    });
    return tr;
  }

  function searchText(r) {
    if (r.search === undefined) r.search = [r.id, r.family, r.cause, r.model, r.summary].join(" ").toLowerCase();
    return r.search;
  }

  function render() {
    var q = text.value.trim().toLowerCase();
    var matching = order.filter(function (i) {
      var r = records[i];
      return (!verdict.value || r.verdict === verdict.value) &&
             (!family.value || r.family === family.value) &&
             (!q || searchText(r).indexOf(q) >= 0);
    });
    var frag = document.createDocumentFragment();
    matching.slice(0, limit).forEach(function (i) {
      frag.appendChild(rowOf(i));
      if (opened[i]) frag.appendChild(detailRowOf(i));
    });
    tbody.textContent = "";
    tbody.appendChild(frag);
    shown.textContent = matching.length + " of " + records.length + " checks" +
      (matching.length > limit ? ", first " + limit + " shown" : "");
    more.hidden = matching.length <= limit;
  }

  [text, verdict, family].forEach(function (node) {
    node.addEventListener("input", function () { limit = PAGE; render(); });
  });
  more.addEventListener("click", function () { limit += PAGE * 5; render(); });

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
    th.addEventListener("click", function () {
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1, key = COLUMNS[index].key;
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      order.sort(function (a, b) {
        var x = key(records[a]), y = key(records[b]);
        return x < y ? -dir : x > y ? dir : a - b;
      });
      render();
    });
  });

  tbody.addEventListener("click", function (e) {
    if (e.target.closest("a")) return;
    var row = e.target.closest("tr.row");
    if (!row) return;
    var i = +row.dataset.i;
    opened[i] = !opened[i];
    if (opened[i]) row.parentNode.insertBefore(detailRowOf(i), row.nextSibling);
    else if (row.nextSibling && row.nextSibling.className === "detail") row.parentNode.removeChild(row.nextSibling);
  });

  function gib(bytes) { return (bytes / GIB).toFixed(2) + " GiB"; }

  // uPlot is compiled the first time a chart is drawn, not on every load.
  function loadUPlot() {
    if (!window.uPlot) {
      var script = document.createElement("script");
      script.textContent = document.getElementById("uplot-source").textContent;
      document.head.appendChild(script);
    }
    return window.uPlot;
  }

  // The check's call, shaded under the lines and labelled.
  function callBand(call) {
    return { hooks: { drawAxes: [function (u) {
      var box = u.bbox, ctx = u.ctx, dpr = window.devicePixelRatio || 1;
      var left = Math.max(box.left, u.valToPos(call[0], "x", true));
      var right = Math.min(box.left + box.width, u.valToPos(call[1], "x", true));
      if (right <= left) return;
      ctx.save();
      ctx.fillStyle = "rgba(255, 179, 0, 0.18)";
      ctx.fillRect(left, box.top, Math.max(right - left, dpr), box.height);
      ctx.fillStyle = "#6d4c00";
      ctx.font = Math.round(11 * dpr) + "px sans-serif";
      ctx.fillText("call", left + 3 * dpr, box.top + 12 * dpr);
      ctx.restore();
    }] } };
  }

  // One check's memory: each series with its peak marked, its card budget
  // dashed, axes as memory_plot.py computed them. The drawn scales are left
  // on the box for a reader's tools (and the page's tests) to see.
  function drawChart(target, p) {
    if (target.dataset.drawn) return;
    target.dataset.drawn = "1";
    var names = Object.keys(p.mib), colors = ["#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a"];
    var times = Array.isArray(p.t) ? p.t : [];
    for (var k = 0; !Array.isArray(p.t) && k < p.t.n; k++) times.push(p.t.start + k * p.t.step);
    var series = [{ label: "s" }], columns = [times];
    names.forEach(function (name, i) {
      var values = p.mib[name].map(function (v) { return v === null ? null : v * MIB / GIB; });
      var color = colors[i % colors.length], peakAt = -1;
      values.forEach(function (v, j) { if (v !== null && (peakAt < 0 || v > values[peakAt])) peakAt = j; });
      series.push({ label: name + " (GiB)", stroke: color, width: 1.5, points: { show: false } });
      columns.push(values);
      series.push({ label: name + " peak", stroke: color, width: 0, points: { show: true, size: 9, fill: color } });
      columns.push(values.map(function (v, j) { return j === peakAt ? v : null; }));
      var budget = (p.budget_gib || {})[name];
      if (budget) {
        series.push({ label: name + " budget", stroke: color, dash: [6, 4], width: 1, points: { show: false } });
        columns.push(times.map(function () { return budget; }));
      }
    });
    function leaveScales(u) {
      target.dataset.x = u.scales.x.min + "," + u.scales.x.max;
      target.dataset.y = u.scales.y.min + "," + u.scales.y.max;
    }
    var UPlot = loadUPlot();
    new UPlot({ width: Math.min(720, target.clientWidth || 720), height: 220, series: series,
                scales: { x: { time: false, range: function () { return p.x; } },
                          y: { range: function () { return p.y; } } },
                plugins: (p.call ? [callBand(p.call)] : []).concat([{ hooks: { ready: [leaveScales] } }]),
                axes: [{ label: "time since the scenario's start (s)" }, { label: "GiB" }] },
              columns, target);
  }

  function drawCharts(boxes, all) {
    Array.prototype.forEach.call(boxes, function (box) { drawChart(box, all[+box.dataset.i].plot); });
  }

  // The failures' charts are drawn as their boxes near the screen: drawing
  // every one up front would cost more than the rest of the page.
  var boxes = document.querySelectorAll("#details div.chart[data-i]");
  if (boxes.length) details().then(function (all) {
    if (!("IntersectionObserver" in window)) return drawCharts(boxes, all);
    var watcher = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) { drawCharts([e.target], all); watcher.unobserve(e.target); }
      });
    }, { rootMargin: "600px" });
    Array.prototype.forEach.call(boxes, function (box) { watcher.observe(box); });
  });

  // #row-N opens that check's detail: a link to paste in the morning chat,
  // and what the page's own "fixed" links use.
  function openFromHash() {
    var m = /^#row-(\d+)$/.exec(location.hash), i = m ? +m[1] : -1;
    if (!records[i]) return false;
    opened[i] = true;
    limit = Math.max(limit, order.indexOf(i) + 1);
    render();
    var row = document.getElementById("row-" + i);  // absent when a filter hides it
    if (row) {
      // Stop below the sticky header, however many lines it wraps to.
      row.style.scrollMarginTop = table.tHead.offsetHeight + "px";
      row.scrollIntoView();
    }
    return true;
  }
  window.addEventListener("hashchange", openFromHash);
  if (!openFromHash()) render();
  document.documentElement.setAttribute("data-ready", "1");
})();
