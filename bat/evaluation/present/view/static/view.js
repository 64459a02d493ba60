// bat eval.view: the pages' only script (served by the viewer; the CSP forbids inline code).
// The run page fills its task × attempt grid from the run's event stream; the runs page
// reloads when a run starts, ends or moves on. Nothing an agent wrote is ever put into the
// page as HTML: text goes in through textContent and attributes only.
"use strict";

(function () {
  const body = document.body;
  if (body.dataset.page === "run") {
    followRun(body);
  } else if (body.dataset.page === "runs") {
    followRuns(body.dataset.signature || "");
  }

  function followRun(body) {
    const run = body.dataset.run;
    const outcomes = ["pass", "fail", "error", "infra", "unreadable"];
    const seen = new Map(); // cell id -> outcome shown
    document.querySelectorAll(".cell[id]").forEach((cell) => {
      if (cell.dataset.outcome) seen.set(cell.id, cell.dataset.outcome);
    });
    if (body.dataset.status !== "running") return;
    const note = document.getElementById("live-note");
    note.hidden = false;
    note.textContent = "Live: cells fill in as episodes end.";
    const started = Date.parse(body.dataset.started || "");
    const base = "/runs/" + encodeURIComponent(run);
    const source = new EventSource(base + "/events?from=" + body.dataset.nextEvent);
    eta();

    source.addEventListener("episode", (message) => {
      const episode = JSON.parse(message.data);
      const m = String(episode.model_index);
      // The counts cover every episode, the cells only the rows on this page: what a
      // cell showed before comes from the page when it is here, else from the server.
      const old = episode.cell ? document.getElementById(episode.cell) : null;
      const before = old ? seen.get(episode.cell) : episode.before;
      if (before) bump(m, before, -1);
      else bump(m, "done", 1);
      bump(m, episode.outcome, 1);
      eta();
      if (!old) return; // a row on another page, or a task run.json does not list
      seen.set(episode.cell, episode.outcome);
      const cell = document.createElement("a");
      cell.id = episode.cell;
      cell.className = "cell fresh " + (outcomes.includes(episode.outcome) ? episode.outcome : "fail");
      cell.dataset.outcome = episode.outcome;
      cell.href = base + "/episodes/" + encodeURIComponent(episode.model) + "/" + encodeURIComponent(episode.episode);
      cell.title = episode.title;
      cell.textContent = String(episode.attempt);
      old.replaceWith(cell);
    });
    source.addEventListener("reset", () => {
      source.close(); // the viewer restarted: its numbering is new, the page starts again
      window.location.reload();
    });
    source.addEventListener("end", (message) => {
      source.close();
      const status = JSON.parse(message.data).status;
      const badge = document.getElementById("run-status");
      badge.textContent = status;
      badge.className = "status status-" + status;
      body.dataset.status = status;
      note.textContent = "The run ended (" + status + "). ";
      const again = document.createElement("a");
      again.href = base;
      again.textContent = "Reload for its summary.";
      note.appendChild(again);
      document.getElementById("eta").textContent = "";
    });
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CONNECTING) {
        note.textContent = "Live: reconnecting…";
      }
    });
    source.addEventListener("open", () => {
      note.textContent = "Live: cells fill in as episodes end.";
    });

    function bump(m, key, by) {
      const id = key === "done" ? "done-" + m : "n-" + m + "-" + key;
      const counter = document.getElementById(id);
      if (counter) {
        const n = Number(counter.textContent) + by;
        counter.textContent = String(n);
        const word = counter.parentElement.querySelector(".word");
        if (word) word.textContent = n === 1 ? word.dataset.one : word.dataset.many;
      }
      if (key === "done") {
        const bar = document.getElementById("progress-" + m);
        if (bar) bar.value = Number(bar.value) + by;
      }
    }

    function eta() {
      let done = 0;
      let expected = 0;
      document.querySelectorAll("progress[id^='progress-']").forEach((bar) => {
        done += Number(bar.value);
        expected += Number(bar.max);
      });
      const target = document.getElementById("eta");
      if (!target || !done || Number.isNaN(started)) return;
      const left = ((Date.now() - started) / done) * Math.max(expected - done, 0);
      target.textContent = done >= expected ? "" : "· about " + duration(left) + " left";
    }

    function duration(ms) {
      const s = Math.round(ms / 1000);
      if (s < 60) return s + " s";
      if (s < 3600) return Math.round(s / 60) + " min";
      return (s / 3600).toFixed(1) + " h";
    }
  }

  function followRuns(signature) {
    const source = new EventSource("/events?since=" + encodeURIComponent(signature));
    source.addEventListener("changed", () => {
      source.close();
      window.location.reload();
    });
  }
})();
