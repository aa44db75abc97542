// labelserve dashboard: the progress bars of the jobs on the page follow the jobs (a short poll of
// /ui/jobs/progress), a page whose job ends reloads to show its result, and the training form's
// method list shows the chosen method's parameters, its model name follows the dataset, job times fill in as
// they happen, and an error page's Back link goes back. Everything works
// without this file (the pages' Content-Security-Policy allows no inline script: behaviour lives here).
(function () {
  "use strict";
  function poll() {
    var bars = document.querySelectorAll(".progress[data-job]");
    var live = [];
    bars.forEach(function (el) {
      var s = el.getAttribute("data-status");
      if (s === "queued" || s === "running") live.push(el.getAttribute("data-job"));
    });
    if (!live.length) return;
    fetch("/ui/jobs/progress?ids=" + encodeURIComponent(live.join(",")), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : {}; })
      .then(function (jobs) {
        var ended = false;
        bars.forEach(function (el) {
          var job = jobs[el.getAttribute("data-job")];
          if (!job) return;
          el.setAttribute("data-status", job.status);
          var bar = el.querySelector("progress");
          bar.value = job.progress;
          bar.textContent = Math.round(job.progress * 100) + "%";
          var status = el.querySelector(".status");
          status.textContent = job.status;
          status.className = "status status-" + job.status;
          var stage = el.querySelector(".stage");
          stage.lastChild.textContent = " " + job.stage + (job.position ? " · place " + job.position + " in the queue" : "");
          document.querySelectorAll('[data-time][data-for="' + el.getAttribute("data-job") + '"]').forEach(function (dd) {
            dd.textContent = job[dd.getAttribute("data-time")];
          });
          if (job.ended) ended = true;
        });
        if (ended) { window.location.reload(); return; }
        window.setTimeout(poll, 700);
      })
      .catch(function () { window.setTimeout(poll, 3000); });
  }
  document.addEventListener("DOMContentLoaded", function () {
    window.setTimeout(poll, 500);
    document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
      select.addEventListener("change", function () { select.form.submit(); });
    });
    // the training form's model name follows the chosen dataset (<dataset>-<method>) until the user types one
    document.querySelectorAll("input[data-suggest]").forEach(function (input) {
      var select = input.form.querySelector("select[name=dataset_id]");
      if (!select) return;
      select.addEventListener("change", function () {
        if (input.value !== "" && input.value !== input.getAttribute("data-suggested")) return;
        var option = select.options[select.selectedIndex];
        var name = option && option.value ? option.getAttribute("data-name") + "-" + input.getAttribute("data-suggest") : "";
        var slug = name.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[._-]+/, "").slice(0, 120);
        input.value = slug;
        input.setAttribute("data-suggested", slug);
      });
    });
    document.querySelectorAll("a[data-back]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        if (window.history.length > 1) { event.preventDefault(); window.history.back(); }
      });
    });
  });
})();
