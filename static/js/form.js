/* The scenario form and its uploads. The form is never redrawn: an answer to it carries the whole workspace, but
   only #results swaps (hx-select); what the form shows besides the user's own values (error messages, red
   borders, placeholders that depend on other fields) is copied from the answer's form into the live one, so
   nothing typed or ticked meanwhile is lost. The model picker shows each model's badges and takes an uploaded
   config.json in place of a catalogue model; a trace upload can be cleared. */

import { revealSection } from "./mechanisms.js";

// Capture phase and the listeners' order matter (see each); app.js calls this once.
export function wireForm() {
  document.addEventListener("change", onModelPicked, true);
  document.addEventListener("click", onClearModelConfig);
  document.body.addEventListener("htmx:beforeSwap", keepModelOnBadUpload);
  document.body.addEventListener("htmx:afterSettle", selectUploadedModel);
  document.body.addEventListener("htmx:beforeSwap", syncFormFromAnswer);
  document.addEventListener("click", onClearTrace);
}

// An element marked data-change-stays-here handles its own change event; the form around it must not see it
// (here, in form.js, not an inline handler: the pages' Content-Security-Policy allows no inline script).
export function keepChangesHere(root) {
  if (!root.querySelectorAll) return;
  var marked = Array.prototype.slice.call(root.querySelectorAll("[data-change-stays-here]"));
  if (root.matches && root.matches("[data-change-stays-here]")) marked.push(root);
  marked.forEach(function (el) {
    el.addEventListener("change", function (e) { e.stopPropagation(); });
  });
}

// ----- the model picker: each model's badges, and an uploaded config.json in place of a catalogue model -----
// The uploaded model is the picker's selected entry (value "": no catalogue model) while the hidden model_file
// input in #model-config-status names it; picking a catalogue model drops the upload, as Remove does.
function showBadges(select) {
  var box = document.getElementById("model-badges");
  var opt = select.options[select.selectedIndex];
  if (!box) return;
  var list = [];
  try { list = opt && opt.dataset.badges ? JSON.parse(opt.dataset.badges) : []; } catch (err) { list = []; }
  box.textContent = "";
  list.forEach(function (b) {
    var span = document.createElement("span");
    span.className = "badge badge-" + b.kind;
    span.title = b.title;
    span.textContent = b.label;
    box.appendChild(span);
  });
}

function dropModelConfig(select) {
  var status = document.getElementById("model-config-status");
  if (status) status.innerHTML = "";
  var file = document.getElementById("f-model-config");
  if (file) file.value = "";
  var uploaded = select.querySelector("option[data-uploaded]");
  if (uploaded) select.removeChild(uploaded);
}

// Capture phase: the upload goes before the form's own change handler sends the scenario (model and model_file
// together would be refused).
function onModelPicked(e) {
  var select = e.target.closest && e.target.closest("[data-model-picker]");
  if (!select) return;
  var opt = select.options[select.selectedIndex];
  if (!opt || !opt.hasAttribute("data-uploaded")) {
    var value = select.value;
    dropModelConfig(select);
    select.value = value;
  }
  showBadges(select);
}

function onClearModelConfig(e) {
  if (!e.target.closest("[data-clear-model-config]")) return;
  var select = document.querySelector("[data-model-picker]");
  if (!select) return;
  dropModelConfig(select);
  select.value = "";
  showBadges(select);
  htmx.trigger("#scenario-form", "submit");
}

function fromModelUpload(e) {
  var elt = e.detail && e.detail.requestConfig && e.detail.requestConfig.elt;
  return !!elt && elt.id === "f-model-config";
}

// A file the simulator cannot read leaves the model in use as it was; only its error is shown.
function keepModelOnBadUpload(e) {
  var status = document.getElementById("model-config-status");
  if (!status || !fromModelUpload(e) || e.detail.xhr.status < 400) return;
  e.detail.shouldSwap = false;
  var old = document.getElementById("err-model-config");
  if (old) old.parentNode.removeChild(old);
  var answer = new DOMParser().parseFromString(e.detail.xhr.responseText, "text/html");
  var error = answer.getElementById("err-model-config");
  if (error) status.appendChild(document.importNode(error, true));
}

function selectUploadedModel(e) {
  var select = document.querySelector("[data-model-picker]");
  var hidden = document.querySelector("#model-config-status input[name=model_file]");
  if (!fromModelUpload(e) || !select || !hidden) return;
  var opt = select.querySelector("option[data-uploaded]");
  if (!opt) {
    opt = document.createElement("option");
    opt.value = "";
    opt.setAttribute("data-uploaded", "");
    select.appendChild(opt);
  }
  opt.textContent = hidden.dataset.modelName + " (uploaded config.json)";
  opt.dataset.badges = hidden.dataset.badges;
  opt.selected = true;
  showBadges(select);
  htmx.trigger("#scenario-form", "submit");
}

// ----- the scenario form is never redrawn -----
var COPIED_ATTRIBUTES = ["placeholder", "title", "aria-invalid", "aria-describedby"];

function ownErrors(el) {
  return Array.prototype.filter.call(el.children, function (c) { return c.classList.contains("field-error"); });
}

function syncForm(live, fresh) {
  var slots = fresh.querySelectorAll("[data-field]");
  for (var i = 0; i < slots.length; i++) {
    var f = slots[i], l = live.querySelector('[data-field="' + f.dataset.field + '"]');
    if (!l) continue;
    l.classList.toggle("invalid", f.classList.contains("invalid"));
    var folded = l.closest("details");
    if (folded && f.classList.contains("invalid")) folded.open = true; // an error must not hide in "Advanced"
    if (f.classList.contains("invalid")) revealSection(l); // nor in a mechanism's folded section
    ownErrors(l).forEach(function (p) { l.removeChild(p); });
    ownErrors(f).forEach(function (p) { l.appendChild(document.importNode(p, true)); });
    var fc = f.querySelector("input[id^='f-'], select"), lc = fc && l.querySelector("#" + fc.id);
    if (lc && lc.type !== "file") syncControl(lc, fc);
  }
}

// A field's control takes the answer's attributes, and a select its options' labels (same values, same order).
function syncControl(lc, fc) {
  COPIED_ATTRIBUTES.forEach(function (name) {
    if (fc.hasAttribute(name)) lc.setAttribute(name, fc.getAttribute(name)); else lc.removeAttribute(name);
  });
  if (lc.tagName === "SELECT" && lc.options.length === fc.options.length) {
    for (var k = 0; k < lc.options.length; k++) {
      if (lc.options[k].value === fc.options[k].value) lc.options[k].textContent = fc.options[k].textContent;
    }
  }
}

function showStale(results, freshDoc) {
  results.classList.add("stale");
  var template = freshDoc.getElementById("stale-note-template");
  var old = document.getElementById("stale-note");
  if (old) old.parentNode.removeChild(old);
  if (template) results.insertBefore(document.importNode(template.content, true), results.firstChild);
}

function syncFormFromAnswer(e) {
  var form = document.getElementById("scenario-form");
  if (!form || e.detail.requestConfig.elt !== form) return;
  var freshDoc = new DOMParser().parseFromString(e.detail.xhr.responseText, "text/html");
  var fresh = freshDoc.getElementById("scenario-form");
  if (fresh) syncForm(form, fresh);
  var results = document.getElementById("results");
  // An invalid field keeps the last good results on screen, dimmed; there is nothing to keep on a page that
  // has none yet.
  if (e.detail.xhr.status === 422 && results && results.querySelector("#card-metrics")) {
    e.detail.shouldSwap = false;
    showStale(results, freshDoc);
  }
}

// The trace upload's Clear button: the upload dropped, and the scenario sent again without it.
function onClearTrace(e) {
  if (!e.target.closest("[data-clear-trace]")) return;
  var status = document.getElementById("trace-status");
  if (status) status.innerHTML = "";
  var file = document.getElementById("f-trace");
  if (file) file.value = "";
  htmx.trigger("#scenario-form", "submit");
}
