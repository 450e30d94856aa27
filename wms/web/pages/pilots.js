// Pilots (operators and managers): by queue and state as `wms pilots` lists
// them, each with the jobs it ran, read when the list is opened.

import {get, query} from "../api.js";
import {h, fill, notice, table, when} from "../dom.js";

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

export async function render(main) {
  const body = h("div", {class: "stack", id: "pilots"});
  fill(main, h("h1", {}, "Pilots"), body);
  const pilots = await get("/pilots");
  const byQueue = new Map();
  for (const pilot of pilots) {
    if (!byQueue.has(pilot.Queue)) byQueue.set(pilot.Queue, []);
    byQueue.get(pilot.Queue).push(pilot);
  }
  if (!byQueue.size) {
    fill(body, h("p", {}, "No pilot has been submitted."));
    return;
  }
  fill(body, [...byQueue.entries()].sort().map(([queue, rows]) => {
    const states = {};
    for (const p of rows) states[p.State] = (states[p.State] ?? 0) + 1;
    return h("section", {class: "card", "aria-label": `Pilots of ${queue}`, dataset: {queue}},
      h("h2", {}, queue),
      h("p", {class: "states"}, Object.entries(states).sort().map(([s, n]) => `${s} ${n}`).join(" · ")),
      table(`Pilots of ${queue}`, ["PilotID", "State", "Backend", "VO", "Submitted", "LastUpdate", "JobsRun", "Jobs"], rows,
        (p, c) => c === "Jobs" ? pilotJobs(p) : c === "Submitted" || c === "LastUpdate" ? when(p[c]) : p[c]));
  }));
}
