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
