/* Drawn goodput curves outlive a change of the scenario: kept, marked stale, one click redraws them. A sweep
   (a job on the server) takes a while; a new scenario's results come without curves (only the range they
   propose). Curves on screen are lifted out before the swap (app.js's release would purge them) and put in the
   new card's place for them, under a note saying they are the previous scenario's and a button that sweeps the
   same rates again. */

var keptCurves = null;
var SWEEP_PARAMS = ["rate_min", "rate_max", "rate_step"];

// Register after form.js's htmx:beforeSwap (it may cancel the swap) and before app.js's release.
export function keepGoodputCurves() {
  document.body.addEventListener("htmx:beforeSwap", liftCurves);
  document.body.addEventListener("htmx:afterSwap", putCurvesBack);
  document.addEventListener("click", function (e) {
    if (!e.target.closest("[data-goodput-redraw]")) return;
    var form = document.getElementById("goodput-form");
    if (form) htmx.trigger(form, "submit");
  });
}

function sweptRates(status) {
  if (status.dataset.rates) return status.dataset.rates.split(",");
  var params = new URLSearchParams(window.location.search); // the page's URL names the sweep drawn
  var rates = SWEEP_PARAMS.map(function (k) { return params.get(k); });
  if (rates.every(function (r) { return r; })) return rates;
  var form = document.getElementById("goodput-form");
  return form ? SWEEP_PARAMS.map(function (k) { return form.elements[k].value; }) : null;
}

function liftCurves(e) {
  var form = document.getElementById("scenario-form");
  if (!form || e.detail.requestConfig.elt !== form || !e.detail.shouldSwap) return;
  var status = document.getElementById("goodput-status");
  if (!status || !status.querySelector("#plot-goodput")) return;
  var rates = sweptRates(status);
  if (!rates) return;
  status.dataset.rates = rates.join(",");
  status.parentNode.removeChild(status);
  keptCurves = status;
}

function putCurvesBack() {
  var kept = keptCurves, fresh = document.getElementById("goodput-status");
  var form = document.getElementById("goodput-form");
  keptCurves = null;
  if (!kept) return;
  if (!fresh || !form || fresh.querySelector("#plot-goodput")) { // curves of their own, or none possible
    if (window.Plotly) kept.querySelectorAll(".js-plotly-plot").forEach(function (d) { Plotly.purge(d); });
    return;
  }
  var rates = kept.dataset.rates.split(",");
  SWEEP_PARAMS.forEach(function (k, i) { form.elements[k].value = rates[i]; });
  kept.classList.add("stale");
  kept.removeAttribute("hx-get"); // a finished sweep never polls; nothing of the old one may
  if (!kept.querySelector("[data-goodput-stale]")) {
    var template = document.getElementById("goodput-stale-template");
    if (template) kept.insertBefore(document.importNode(template.content, true), kept.firstChild);
  }
  var note = kept.querySelector("[data-goodput-stale] [data-rates]");
  if (note) note.textContent = rates[0] + "–" + rates[1] + " req/s, step " + rates[2];
  fresh.parentNode.replaceChild(kept, fresh);
}
