// Jobs: a table to filter (state, owner, site, queue, reservation) and sort
// (by any column's header), with the selected jobs killed in one request.
// The server sends the jobs a page at a time, newest first, filtered by
// state on its side; the text filters and the sort apply to the page shown.

import {api, getPage, query} from "../api.js";
import {h, fill, field, notice, when, confirmInPlace} from "../dom.js";

export const STATES = ["Received", "Checking", "Waiting", "Held", "Matched", "Running", "Done", "Failed", "Killed",
  "Stalled", "Deleted"];
const FINAL = new Set(["Done", "Failed", "Killed", "Deleted"]);
// State second: on a phone the first columns are what shows without scrolling.
const COLUMNS = [
  ["JobID", "Job"], ["Status", "State"], ["JobName", "Name"], ["MinorStatus", "Minor status"], ["Owner", "Owner"],
  ["Site", "Site"], ["Queue", "Queue"], ["AR", "Reservation"], ["SubmissionTime", "Submitted"],
];
const FILTERS = [["Owner", "Owner"], ["Site", "Site"], ["Queue", "Queue"], ["AR", "Reservation"]];
const PAGE = 200; // rows a page of the table holds

function hashQuery() {
  const [, search = ""] = location.hash.split("?");
  return new URLSearchParams(search);
}

function compare(a, b) {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a ?? "").localeCompare(String(b ?? ""), undefined, {numeric: true});
}

export async function render(main, {allowed}) {
  const mayKill = allowed("POST /jobs/kill");
  // An ended job can still be selected: to be rescheduled.
  const mayReschedule = allowed("POST /jobs/reschedule");
  // cursors: the cursor of each page shown so far (null for the first), to go back; next: the page after.
  const state = {rows: [], sort: "JobID", ascending: false, selected: new Set(), cursors: [null], next: null};
  const status = h("div", {"aria-live": "polite", class: "status-line"});

  const stateFilter = h("select", {id: "filter-status"},
    h("option", {value: ""}, "any"), STATES.map((s) => h("option", {value: s}, s)));
  stateFilter.value = hashQuery().get("status") || "";
  const textFilters = Object.fromEntries(FILTERS.map(([key]) =>
    [key, h("input", {type: "search", id: `filter-${key.toLowerCase()}`, autocomplete: "off"})]));
  const filters = h("form", {class: "filters", role: "search", "aria-label": "Filter jobs"},
    field("State", stateFilter), FILTERS.map(([key, label]) => field(label, textFilters[key])));
  filters.addEventListener("input", (event) => {
    if (event.target === stateFilter) { state.cursors = [null]; load(); } else draw();
  });
  filters.addEventListener("submit", (event) => event.preventDefault());

  const killButton = h("button", {type: "button", id: "kill-selected", disabled: true}, "Kill selected");
  const confirmBox = h("div", {class: "confirm", hidden: true, role: "group", "aria-label": "Confirm kill"});
  // Hold (the user hold, qhold -h u) and release (every hold the caller may): undone as easily, so not confirmed.
  const controls = [["hold", "Hold", "held", "not_held"], ["release", "Release", "released", "not_released"],
    ["reschedule", "Reschedule", "rescheduled", "not_rescheduled"]]
    .filter(([verb]) => allowed(`POST /jobs/${verb}`))
    .map(([verb, label, done, refused]) => {
      const button = h("button", {type: "button", id: `${verb}-selected`, disabled: true, dataset: {label}}, `${label} selected`);
      button.addEventListener("click", async () => {
        const ids = [...state.selected].sort((a, b) => a - b);
        try {
          const answer = await api("POST", `/jobs/${verb}`, {job_ids: ids});
          const kept = Object.entries({...(answer.still_held ?? {}), ...answer[refused]}).map(([id, why]) => `${id} ${why}`);
          state.selected.clear();
          await load();
          fill(status, notice(`${label[0].toUpperCase()}${done.slice(1)}: ${answer[done].join(", ") || "none"}.` +
            (kept.length ? ` Not ${done}: ${kept.join("; ")}.` : "")));
        } catch (error) {
          fill(status, notice(`Nothing ${done}: ${error.message}`, "error"));
        }
        button.focus();
      });
      return button;
    });
  const refreshButton = h("button", {type: "button", onclick: () => load()}, "Refresh");
  const newerButton = h("button", {type: "button", id: "jobs-newer", disabled: true,
    onclick: () => { state.cursors.pop(); load(); }}, "Newer page");
  const olderButton = h("button", {type: "button", id: "jobs-older", disabled: true,
    onclick: () => { state.cursors.push(state.next); load(); }}, "Older page");
  const tbody = h("tbody");
  const headRow = h("tr");
  const tableElement = h("table", {id: "jobs-table"},
    h("caption", {class: "visually-hidden"}, "Jobs"), h("thead", {}, headRow), tbody);

  function visible() {
    const wanted = stateFilter.value;
    const texts = Object.entries(textFilters).map(([key, input]) => [key, input.value.trim().toLowerCase()])
      .filter(([, text]) => text);
    const rows = state.rows.filter((row) => (!wanted || row.Status === wanted) &&
      texts.every(([key, text]) => String(row[key] ?? "").toLowerCase().includes(text)));
    rows.sort((a, b) => compare(a[state.sort], b[state.sort]) * (state.ascending ? 1 : -1));
    return rows;
  }

  function drawHead() {
    fill(headRow,
      mayKill ? h("th", {scope: "col"}, h("span", {class: "visually-hidden"}, "Select")) : null,
      COLUMNS.map(([key, label]) => {
        const sorted = state.sort === key;
        return h("th", {scope: "col", "aria-sort": sorted ? (state.ascending ? "ascending" : "descending") : "none"},
          h("button", {type: "button", class: "sort", onclick: () => {
            state.ascending = sorted ? !state.ascending : true;
            state.sort = key;
            draw();
            headRow.querySelector(`[data-key="${key}"]`)?.focus();
          }, dataset: {key}}, label, h("span", {"aria-hidden": "true"}, sorted ? (state.ascending ? " ▲" : " ▼") : "")));
      }));
  }

  function draw() {
    drawHead();
    const rows = visible();
    fill(tbody, rows.length ? rows.map((row) => h("tr", {dataset: {job: row.JobID}},
      mayKill ? h("td", {}, h("input", {type: "checkbox", "aria-label": `Select job ${row.JobID}`,
        checked: state.selected.has(row.JobID), disabled: FINAL.has(row.Status) && !mayReschedule,
        onchange: (event) => { if (event.target.checked) state.selected.add(row.JobID); else state.selected.delete(row.JobID); counted(); }})) : null,
      COLUMNS.map(([key]) => h("td", {dataset: {column: key}},
        key === "JobID" ? h("a", {href: `#/jobs/${row.JobID}`}, row.JobID)
          : key === "Status" ? h("span", {class: `state state-${row.Status}`}, row.Status)
            : key === "SubmissionTime" ? when(row[key]) : row[key] ?? ""))))
      : h("tr", {}, h("td", {colspan: COLUMNS.length + (mayKill ? 1 : 0), class: "empty"}, "No job matches.")));
    const more = state.next || state.cursors.length > 1 ? ` (page ${state.cursors.length}${state.next ? "; older jobs on the next" : ""})` : "";
    fill(status, `${rows.length} of ${state.rows.length} jobs shown${more}.`);
    newerButton.disabled = state.cursors.length <= 1;
    olderButton.disabled = !state.next;
    counted();
  }

  function counted() {
    const ids = [...state.selected];
    killButton.disabled = ids.length === 0;
    killButton.textContent = ids.length ? `Kill selected (${ids.length})` : "Kill selected";
    for (const button of controls) {
      button.disabled = ids.length === 0;
      button.textContent = ids.length ? `${button.dataset.label} selected (${ids.length})` : `${button.dataset.label} selected`;
    }
  }

  killButton.addEventListener("click", () => {
    const ids = [...state.selected].sort((a, b) => a - b);
    const plural = ids.length > 1 ? "s" : "";
    confirmInPlace(confirmBox, `Kill job${plural} ${ids.join(", ")}?`, `Kill ${ids.length} job${plural}`, async () => {
      try {
        const answer = await api("POST", "/jobs/kill", {job_ids: ids});
        const kept = Object.entries(answer.not_killed).map(([id, why]) => `${id} ${why}`);
        state.selected.clear();
        await load();
        const stopping = answer.stopping.length ? ` On their nodes, ${answer.stopping.join(", ")} stop at their pilots' next heartbeat.` : "";
        fill(status, notice(`Killed: ${answer.killed.join(", ") || "none"}.` + stopping + (kept.length ? ` Not killed: ${kept.join("; ")}.` : "")));
      } catch (error) {
        fill(status, notice(`Nothing killed: ${error.message}`, "error"));
      }
      killButton.focus();
    }, killButton);
  });

  async function load() {
    try {
      const cursor = state.cursors[state.cursors.length - 1];
      const page = await getPage("/jobs" + query({status: stateFilter.value, order: "desc", limit: PAGE, cursor}));
      state.rows = page.rows;
      state.next = page.next;
      const known = new Set(state.rows.map((r) => r.JobID));
      for (const id of state.selected) if (!known.has(id)) state.selected.delete(id);
      draw();
    } catch (error) {
      fill(status, notice(`Jobs not loaded: ${error.message}`, "error"));
    }
  }

  fill(main, h("h1", {}, "Jobs"), filters,
    h("div", {class: "actions"}, mayKill ? killButton : null, mayKill ? controls : null, refreshButton, newerButton, olderButton,
      allowed("POST /jobs") ? h("a", {href: "#/submit", class: "button"}, "Submit a job") : null),
    confirmBox, status,
    h("div", {class: "table-wrap", role: "region", "aria-label": "Jobs table", tabindex: 0}, tableElement));
  await load();
}
