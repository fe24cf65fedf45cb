/* The Gantt at scale. A long run's Gantt shows an even sample of its requests (data-rows of data-total); zooming
   its time axis asks the server for every request in flight in the visible window (/gantt/window, from the cached
   run) and draws them all; zooming back out to the whole run (the home button, a double click) restores the
   sample. The note under the chart says what is drawn, or why not (too many requests in the window). */

var EPS = 1e-6;

// Each drawn line's width: a row's height (the plot's height over its rows), less a gap between rows.
function lineWidths(fig, height) {
  var m = fig.layout.margin || { t: 36, b: 50 };
  var rows = Math.max(1, fig.rows || 1);
  var px = Math.max(1, ((height - m.t - m.b) / rows) * 0.8);
  fig.data.forEach(function (t) { if (t.mode === "lines" && t.line) t.line.width = Math.round(px * 100) / 100; });
}

function copyJson(x) {
  return JSON.parse(JSON.stringify(x));
}

class GanttWindow {
  constructor(div, total, shown) {
    this.div = div;
    this.total = total;
    this.shown = shown;
    this.sample = copyJson({ data: div.data, layout: div.layout });
    this.span = this.sample.layout.xaxis.range ? this.sample.layout.xaxis.range.slice() : null;
    this.note = document.createElement("p");
    this.note.className = "gantt-window-note";
    this.note.setAttribute("role", "status");
    this.note.dataset.windowNote = "";
    this.note.textContent = "Zoom in on the time axis to see every request in that window (" + total.toLocaleString() + " in all).";
    div.insertAdjacentElement("afterend", this.note);
    this.seq = 0;
    this.window = null; // the window drawn (its key), null: the sample
    this.quiet = false; // true while this redraws: plotly's relayout events then are its own
    var self = this;
    // A double click zooms out to the whole run: the sample again.
    div.on("plotly_doubleclick", function () { if (self.window) self.restore(null); });
    div.on("plotly_relayout", function (ev) { self.zoomed(ev); });
  }

  redraw(data, layout, rows) {
    var self = this;
    this.quiet = true;
    return Plotly.react(this.div, data, layout).then(function () {
      self.quiet = false;
      self.div.dataset.rows = String(rows);
    }, function (err) { self.quiet = false; throw err; });
  }

  restore(range) {
    this.window = null;
    delete this.div.dataset.window;
    var layout = copyJson(this.sample.layout);
    if (range) layout.xaxis.range = range;
    this.note.textContent = "Showing " + this.shown.toLocaleString() + " of " + this.total.toLocaleString() +
      " requests, evenly spaced by arrival; zoom in to see every request in a window.";
    return this.redraw(copyJson(this.sample.data), layout, this.shown);
  }

  zoomed(ev) {
    if (this.quiet) return;
    var r0 = ev["xaxis.range[0]"], r1 = ev["xaxis.range[1]"], span = this.span;
    if (ev["xaxis.range"]) { r0 = ev["xaxis.range"][0]; r1 = ev["xaxis.range"][1]; }
    if (ev["xaxis.autorange"]) { this.restore(null); return; }
    if (r0 === undefined || r1 === undefined) return;
    r0 = +r0; r1 = +r1;
    if (span && r0 <= span[0] + EPS && r1 >= span[1] - EPS) { if (this.window) this.restore([r0, r1]); return; }
    // A box zoom also narrows the rows (the y axis is the request index, drawn top to bottom).
    var y0 = ev["yaxis.range[0]"], y1 = ev["yaxis.range[1]"];
    var rows = y0 === undefined || y1 === undefined ? null : [Math.min(+y0, +y1), Math.max(+y0, +y1)];
    this.fetchWindow(Math.max(r0, span ? span[0] : r0), Math.min(r1, span ? span[1] : r1), rows);
  }

  fetchWindow(t0, t1, rows) {
    // The window as the key shows it (times to the microsecond, rows to a tenth) is the window asked for:
    // data-window says exactly which requests the server was asked to draw.
    var t0Text = t0.toFixed(6), t1Text = t1.toFixed(6);
    var rowText = rows ? [rows[0].toFixed(1), rows[1].toFixed(1)] : null;
    var key = t0Text + "," + t1Text + (rowText ? "," + rowText[0] + "," + rowText[1] : "");
    if (this.window === key) return;
    var self = this, seq = ++this.seq, div = this.div;
    var height = div.layout.height || div.clientHeight;
    this.note.textContent = "Loading every request between " + t0.toFixed(2) + " s and " + t1.toFixed(2) + " s…";
    var url = "/gantt/window?" + div.dataset.windowQuery + "&gantt=" + encodeURIComponent(div.dataset.scheduler) +
      "&t0=" + t0Text + "&t1=" + t1Text + (rowText ? "&r0=" + rowText[0] + "&r1=" + rowText[1] : "");
    fetch(url, { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (body) {
        if (seq !== self.seq) return; // a later zoom superseded this one
        return self.show(body, key, [t0, t1], height);
      })
      .catch(function (err) { self.note.textContent = "Could not load the window: " + err; });
  }

  // The server's answer for window `key`: its figure drawn over `range` at the chart's height, or why not.
  show(body, key, range, height) {
    var div = this.div;
    if (!body.figure) {
      this.window = null;
      this.note.textContent = body.message || (body.detail && body.detail[0] && body.detail[0].msg) || "No zoomed view.";
      return;
    }
    var fig = body.figure;
    fig.rows = body.shown;
    fig.layout.height = height;
    fig.layout.xaxis.range = range;
    lineWidths(fig, height);
    // the colours the page drew with (dark mode recolours figures after the server built them light)
    ["paper_bgcolor", "plot_bgcolor", "font"].forEach(function (k) { fig.layout[k] = div.layout[k]; });
    ["xaxis", "yaxis"].forEach(function (ax) {
      ["gridcolor", "linecolor", "tickcolor"].forEach(function (k) {
        if (div.layout[ax] && div.layout[ax][k]) fig.layout[ax][k] = div.layout[ax][k];
      });
    });
    this.window = key;
    div.dataset.window = key;
    this.note.textContent = "Showing " + body.message + ". Zoom out fully to return to the sample.";
    return this.redraw(fig.data, fig.layout, body.shown);
  }
}

// A drawn Gantt that shows a sample of its run's requests gets its window (once).
function setup(div) {
  if (div._ganttWindow || !window.Plotly || !div.on) return;
  var total = +div.dataset.total, shown = +div.dataset.rows;
  if (!div.dataset.windowQuery || !(shown < total)) return;
  div._ganttWindow = new GanttWindow(div, total, shown);
}

// Set up each sampled Gantt once plotly has drawn it (figures.js marks a drawn figure data-drawn="1").
export function watchGanttWindows() {
  new MutationObserver(function (records) {
    records.forEach(function (r) {
      if (r.type === "attributes" && r.target.dataset && r.target.dataset.drawn === "1") setup(r.target);
    });
  }).observe(document.documentElement, { subtree: true, attributes: true, attributeFilter: ["data-drawn"] });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll('[data-figure="gantt"][data-drawn="1"]').forEach(setup);
  });
}
