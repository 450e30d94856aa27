// Pilots (operators and managers): by queue and state as `wms pilots` lists
// them, each with the jobs it ran, read when the list is opened. The server
// sends the pilots a page at a time, by pilot id; the page shown is grouped.
// A pilot the server warns of (it runs payloads without isolation) is marked
// in its row, and a warning above the tables names every such pilot of the page.

import {get, query} from "../api.js";
import {h, fill, notice, table, when} from "../dom.js";
import {pager} from "../pager.js";

function pilotJobs(pilot) {
  const list = h("div");
  const details = h("details", {}, h("summary", {}, "Jobs of this pilot"), list);
  details.addEventListener("toggle", async () => {
    if (!details.open || list.childElementCount) return;
    try {
      const jobs = await get(`/jobs${query({pilot: pilot.PilotID})}`);
      fill(list, jobs.length ? h("ul", {class: "plain"}, jobs.map((job) =>
        h("li", {}, h("a", {href: `#/jobs/${job.JobID}`}, `job ${job.JobID}`), ` ${job.Status}`))) : "none");
    } catch (error) {
      fill(list, notice(error.message, "error"));
    }
  });
  return details;
}

// Pilots started by hand have no queue: they may ask for any.
const BY_HAND = "Started by hand";

function isolation(pilot) {
  if (!pilot.Warning) return pilot.Isolation || "not said";
  return h("strong", {class: "unisolated", title: pilot.Warning}, `${pilot.Isolation} (!)`);
}

function unisolatedWarning(pilots) {
  const warned = pilots.filter((p) => p.Warning);
  if (!warned.length) return [];
  return [h("p", {class: "notice warning", role: "alert", id: "unisolated"},
    `${warned.length} pilot(s) run payloads without isolation: `,
    warned.map((p) => `${p.PilotID}${p.IsolationNote ? ` (${p.IsolationNote})` : ""}`).join(", "))];
}

export async function render(main) {
  const body = h("div", {class: "stack", id: "pilots"});
  const pages = pager({path: "/pilots", noun: "pilots", draw});
  fill(main, h("h1", {}, "Pilots"), pages.element, body);
  await pages.load();

  function draw(pilots) {
    const byQueue = new Map();
    for (const pilot of pilots) {
      const queue = pilot.Queue || BY_HAND;
      if (!byQueue.has(queue)) byQueue.set(queue, []);
      byQueue.get(queue).push(pilot);
    }
    if (!byQueue.size) {
      fill(body, h("p", {}, "No pilot has been submitted."));
      return;
    }
    fill(body, ...unisolatedWarning(pilots), ...[...byQueue.entries()].sort().map(([queue, rows]) => {
      const states = {};
      for (const p of rows) states[p.State] = (states[p.State] ?? 0) + 1;
      return h("section", {class: "card", "aria-label": `Pilots of ${queue}`, dataset: {queue}},
        h("h2", {}, queue),
        h("p", {class: "states"}, Object.entries(states).sort().map(([s, n]) => `${s} ${n}`).join(" · ")),
        table(`Pilots of ${queue}`,
          ["PilotID", "State", "Isolation", "Backend", "VO", "Submitted", "LastUpdate", "JobsRun", "Jobs"], rows,
          (p, c) => c === "Jobs" ? pilotJobs(p) : c === "Isolation" ? isolation(p)
            : c === "Submitted" || c === "LastUpdate" ? when(p[c]) : p[c]));
    }));
  }
}
