/* While the scenario form's request is out, what its runs are doing (GET /api/progress with the same query:
   app/web/progress_api.py), in place of the bare "simulating…": an autoscaler's capacity search on a first
   selection took 80 s there with nothing said (issue #41). Polled once a second; the text goes back to
   "simulating…" when the answer arrives. Nothing is shown that the server did not report. */
var POLL_MS = 1000;

function formQuery(form) {
  var params = new URLSearchParams();
  new FormData(form).forEach(function (value, key) {
    if (typeof value === "string" && value !== "") params.append(key, value);
  });
  return params.toString();
}

function poll(form, busy, state) {
  fetch("/api/progress?" + formQuery(form), { headers: { Accept: "application/json" } })
    .then(function (r) { return r.ok ? r.json() : { doing: null }; })
    .then(function (doc) {
      if (state.out) busy.textContent = doc.doing || state.idleText;
    })
    .catch(function () { /* a missed poll: the next one says it */ });
}

export function reportRunProgress() {
  var state = { out: false, timer: null, idleText: "" };
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    var form = e.detail.elt;
    if (!form || form.id !== "scenario-form") return;
    var busy = form.querySelector(".busy");
    if (!busy) return;
    state.idleText = state.idleText || busy.textContent;
    state.out = true;
    clearInterval(state.timer);
    state.timer = setInterval(function () { poll(form, busy, state); }, POLL_MS);
  });
  document.body.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail.elt;
    if (!form || form.id !== "scenario-form") return;
    state.out = false;
    clearInterval(state.timer);
    var busy = form.querySelector(".busy");
    if (busy && state.idleText) busy.textContent = state.idleText;
  });
}
