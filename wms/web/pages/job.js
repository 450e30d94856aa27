// One job: its state (followed live until it ends), JDL, history, output,
// and the `wms why` table: every queue and the first layer that keeps the
// job from it.

import {api, get} from "../api.js";
import {h, fill, notice, table, when, confirmInPlace} from "../dom.js";

const FINAL = new Set(["Done", "Failed", "Killed"]);
export const REFRESH_MS = 2000;

export async function render(main, {params, allowed}) {
  const jobId = Number(params[0]);
  const summary = h("dl", {class: "summary", id: "job-summary"});
  const actions = h("div", {class: "actions"});
  const status = h("div", {"aria-live": "polite"});
  const jdl = h("pre", {class: "code", id: "job-jdl", tabindex: 0, "aria-label": "JDL"});
  const history = h("div", {id: "job-history"});
  const output = h("div", {id: "job-output"});
  const why = h("div", {id: "job-why"});
  const whyButton = h("button", {type: "button", id: "why-refresh"}, "Ask again");
  // Only a job that has not ended waits; the section is shown for it alone.
  const whySection = h("section", {"aria-labelledby": "why-h", hidden: true},
    h("h2", {id: "why-h"}, "Why it waits"), whyButton, why);
  fill(main,
    h("p", {class: "crumbs"}, h("a", {href: "#/jobs"}, "Jobs"), " / ", `Job ${jobId}`),
    h("h1", {}, `Job ${jobId}`), status, summary, actions,
    whySection,
    h("section", {"aria-labelledby": "history-h"}, h("h2", {id: "history-h"}, "History"), history),
    h("section", {"aria-labelledby": "output-h"}, h("h2", {id: "output-h"}, "Output"), output),
    h("section", {"aria-labelledby": "jdl-h"}, h("h2", {id: "jdl-h"}, "JDL"), jdl));

  let timer = null;
  let stopped = false;
  let last = null;

  async function loadWhy() {
    try {
      const answer = await get(`/jobs/${jobId}/why`);
      fill(why, h("p", {id: "why-summary"}, answer.Summary ?? ""),
        table("Why the job waits, queue by queue", ["Queue", "Layer", "Code", "Reason"], answer.Queues));
    } catch (error) {
      fill(why, notice(error.message, "error"));
    }
  }
  whyButton.addEventListener("click", loadWhy);

  async function loadOutput(job) {
    try {
      const out = await get(`/jobs/${jobId}/output`);
      fill(output,
        h("h3", {}, "stdout"), h("pre", {class: "code", id: "job-stdout", tabindex: 0}, out.stdout || "(empty)"),
        out.stderr ? [h("h3", {}, "stderr"), h("pre", {class: "code", id: "job-stderr", tabindex: 0}, out.stderr)] : null,
        out.truncated ? h("p", {}, "(truncated to its tail)") : null);
    } catch (error) {
      fill(output, h("p", {}, error.status === 404 ? (FINAL.has(job.Status) ? "No output was kept." : "No output yet.") : error.message));
    }
  }

  function showSummary(job) {
    const item = (label, value, id) => h("div", {}, h("dt", {}, label), h("dd", {id}, value ?? ""));
    fill(summary,
      item("State", h("span", {class: `state state-${job.Status}`}, job.Status), "job-status"),
      item("Minor status", job.MinorStatus, "job-minor"), item("Name", job.JobName), item("Owner", `${job.Owner} (${job.OwnerGroup})`),
      item("Site", job.Site), item("Queue", job.Queue), item("Reservation", job.AR ?? "none"),
      item("SubmitPool", job.SubmitPool || "none"), item("Task queue", job.TaskQueue ?? ""),
      item("Submitted", when(job.SubmissionTime)), item("Last update", when(job.LastUpdateTime)));
  }

  // Rebuilt only when the state changes, so a refresh never takes away a question being answered.
  function showActions(job) {
    fill(actions);
    if (allowed("POST /jobs/kill") && !FINAL.has(job.Status)) {
      const kill = h("button", {type: "button", class: "danger", id: "kill-job"}, "Kill this job");
      const confirmBox = h("div", {class: "confirm", hidden: true, role: "group", "aria-label": "Confirm kill"});
      kill.addEventListener("click", () => confirmInPlace(confirmBox, `Kill job ${jobId}?`, `Kill job ${jobId}`, async () => {
        try {
          const answer = await api("POST", "/jobs/kill", {job_ids: [jobId]});
          fill(status, notice(answer.killed.length ? `Job ${jobId} killed.` : `Not killed: ${Object.values(answer.not_killed).join("")}`));
          await refresh(true);
        } catch (error) {
          fill(status, notice(`Not killed: ${error.message}`, "error"));
        }
      }, kill));
      actions.append(kill, confirmBox);
    }
  }

  async function refresh(force = false) {
    try {
      const job = await get(`/jobs/${jobId}`);
      if (stopped) return;
      const changed = !last || last.Status !== job.Status || last.MinorStatus !== job.MinorStatus;
      showSummary(job);
      if (changed || force) {
        showActions(job);
        fill(history, table("Status history", ["Status", "MinorStatus", "Source", "Time"],
          await get(`/jobs/${jobId}/history`), (row, c) => c === "Time" ? when(row.Time) : row[c]));
        await loadOutput(job);
        whySection.hidden = FINAL.has(job.Status);
        if (!last && !whySection.hidden) await loadWhy();
      }
      last = job;
      if (!FINAL.has(job.Status) && !stopped) timer = setTimeout(refresh, REFRESH_MS);
    } catch (error) {
      fill(status, notice(error.message, "error"));
    }
  }
  const text = await get(`/jobs/${jobId}/jdl`).catch((error) => ({JDL: error.message}));
  fill(jdl, text.OriginalJDL || text.JDL);
  await refresh();
  return () => { stopped = true; clearTimeout(timer); };
}
