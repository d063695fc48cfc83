// The pending approvals appear without a reload: every 3 seconds the list is fetched again
// when the set of pending requests changed (no framework, nothing from a CDN).
(function () {
  var box = document.getElementById("pending");
  if (!box) return;
  var seen = null;
  function ids() {
    return Array.prototype.map.call(box.querySelectorAll("section.approval"), function (s) { return s.id; }).join(",");
  }
  seen = ids();
  setInterval(function () {
    if (box.contains(document.activeElement)) return; // never replace a form being filled
    fetch("/api/pending", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data || data.pending.join(",") === seen) return;
        return fetch(box.dataset.poll, { credentials: "same-origin" })
          .then(function (r) { return r.text(); })
          .then(function (html) { box.innerHTML = html; seen = ids(); });
      });
  }, 3000);
})();

// Each pending request's countdown to its deadline, once a second. The time left is counted
// from the server's figure when the list arrived (`data-expires-in-ms`), so a wrong clock in the
// browser does not shift it; `data-expires-at` is the deadline itself. Past it the request is
// shown expired (the runtime refuses an answer then); the next poll drops it from the list.
(function () {
  function words(ms) {
    var s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600);
    var m = Math.floor(s % 3600 / 60), parts = [];
    [[d, "d"], [h, "h"], [m, "m"], [s % 60, "s"]].forEach(function (p) { if (p[0]) parts.push(p[0] + p[1]); });
    return parts.slice(0, 2).join(" ") || "under 1s";
  }
  function tick() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-expires-at]"), function (el) {
      if (!el.dataset.deadline) {
        var left = parseInt(el.dataset.expiresInMs, 10);
        el.dataset.deadline = String(isNaN(left) ? Date.parse(el.dataset.expiresAt) : Date.now() + left);
      }
      var ms = Number(el.dataset.deadline) - Date.now();
      el.textContent = ms > 0
        ? "expires " + el.dataset.expiresAt + " (" + words(ms) + " left)"
        : "expired at " + el.dataset.expiresAt + ": it can no longer be answered";
      el.classList.toggle("error", ms <= 0);
    });
  }
  tick();
  setInterval(tick, 1000);
})();

// A button with `data-confirm` (approve, deny, approve with edits) acts on a second click: the
// first arms it and says what it will do. No key approves or denies anything. Without script,
// the button acts at once.
(function () {
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest("button[data-confirm]") : null;
    document.querySelectorAll("button.armed").forEach(function (b) {
      if (b !== button) { b.classList.remove("armed"); b.textContent = b.dataset.label; }
    });
    if (!button || button.classList.contains("armed")) return;
    e.preventDefault();
    button.dataset.label = button.textContent;
    button.classList.add("armed");
    button.textContent = "Confirm: " + button.dataset.confirm;
  });
})();

// The queue from the keyboard: j and k move between requests, Enter opens the current one, /
// goes to the search box. Keys typed into a field are the field's.
(function () {
  var currentId = null;
  function sections() { return Array.prototype.slice.call(document.querySelectorAll("section.approval")); }
  function show(step) {
    var all = sections();
    if (!all.length) return;
    var at = all.findIndex(function (s) { return s.id === currentId; });
    at = at < 0 ? (step > 0 ? 0 : all.length - 1) : Math.max(0, Math.min(all.length - 1, at + step));
    all.forEach(function (s, i) { s.classList.toggle("current", i === at); });
    currentId = all[at].id;
    all[at].focus({ preventScroll: true });
    all[at].scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
    if (e.key === "j") { show(1); e.preventDefault(); }
    else if (e.key === "k") { show(-1); e.preventDefault(); }
    else if (e.key === "Enter" && currentId && (!t || t.tagName !== "BUTTON" && t.tagName !== "A")) {
      window.location.href = "/approvals/" + encodeURIComponent(currentId);
      e.preventDefault();
    } else if (e.key === "/") {
      var q = document.querySelector("input[name=q]");
      if (q) { q.focus(); e.preventDefault(); }
    }
  });
})();
