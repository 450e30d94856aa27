// One job: its state (followed live until it ends), JDL, history, output,
// and, while it waits, the `wms why` table: every queue and the first layer
// that keeps the job from it; once it has a place, where it runs or ran.

import {api, download, get} from "../api.js";
import {h, fill, notice, table, when, confirmInPlace} from "../dom.js";

const FINAL = new Set(["Done", "Failed", "Killed", "Deleted"]);
// The states of a job that has no place yet: only these wait, and only their page asks why.
const WAITS = new Set(["Received", "Checking", "Waiting", "Held"]);
const HOLD_TYPES = {u: "user", o: "operator", s: "system"};
// The states `wms reschedule` takes a job from.
const ENDED = new Set(["Done", "Failed", "Killed", "Stalled"]);
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
  // Only a job without a place waits; the section is shown for it alone.
  const whySection = h("section", {"aria-labelledby": "why-h", hidden: true},
    h("h2", {id: "why-h"}, "Why it waits"), whyButton, why);
  // A job handed to a pilot (Matched, Running, and after) says where instead.
  const where = h("p", {id: "job-where"});
  const whereHeading = h("h2", {id: "where-h"}, "Where it runs");
  const whereSection = h("section", {"aria-labelledby": "where-h", hidden: true}, whereHeading, where);
  fill(main,
    h("p", {class: "crumbs"}, h("a", {href: "#/jobs"}, "Jobs"), " / ", `Job ${jobId}`),
    h("h1", {}, `Job ${jobId}`), status, summary, actions,
    whySection, whereSection,
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
        // a Held job: who holds it and why (qhold -h u|o|s), instead of the queues
        answer.Holds ? h("div", {id: "job-holds"}, table("Holds on the job", ["Type", "Holder", "Reason", "Time"],
          answer.Holds, (row, c) => c === "Time" ? when(row.Time) : c === "Type" ? HOLD_TYPES[row.Type] : row[c])) : null,
        answer.Queues.length ? table("Why the job waits, queue by queue", ["Queue", "Layer", "Code", "Reason"], answer.Queues) : null);
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
    await loadFiles();
  }

  /** The output sandbox's files, each a button that downloads it (as `wms output ID --dir` does). */
  async function loadFiles() {
    let manifest;
    try {
      manifest = await get(`/jobs/${jobId}/sandbox`);
    } catch (error) {
      return;                          // no sandbox shown: stdout and stderr above are the output
    }
    if (!manifest.OutputFiles.length) return;
    const status = h("div", {"aria-live": "polite"});
    const items = manifest.OutputFiles.map((file) => {
      const button = h("button", {type: "button", class: "link"}, `${file.name}`);
      button.addEventListener("click", async () => {
        try {
          await download(`/jobs/${jobId}/sandbox/output/${encodeURIComponent(file.name)}`, file.name);
        } catch (error) {
          fill(status, notice(`${file.name}: ${error.message}`, "error"));
        }
      });
      return h("li", {}, button, h("span", {class: "hint-inline"}, ` ${file.size} bytes`));
    });
    output.append(h("section", {"aria-labelledby": "files-h", id: "job-files"},
      h("h3", {id: "files-h"}, "Output sandbox files"), h("ul", {class: "plain"}, items), status));
  }

  function showWhere(job) {
    whereSection.hidden = WAITS.has(job.Status) || !job.Queue;
    if (whereSection.hidden) return;
    const ended = FINAL.has(job.Status);
    const place = `queue ${job.Queue} (site ${job.Queue.split("/")[0]})`;
    fill(whereHeading, ended ? "Where it ran" : "Where it runs");
    fill(where, ended ? `Ran in ${place}; ended ${job.Status}${job.MinorStatus ? `: ${job.MinorStatus}` : ""}.`
      : job.Status === "Matched" ? `Handed to a pilot of ${place}, which has not confirmed yet.`
      : job.Status === "Running" ? `Running in ${place}.`
      : `${job.Status} in ${place}${job.MinorStatus ? `: ${job.MinorStatus}` : ""}.`);
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
          fill(status, notice(answer.killed.length ? `Job ${jobId} killed.` + (answer.stopping.length ? " Its pilot stops the payload at its next heartbeat." : "") : `Not killed: ${Object.values(answer.not_killed).join("")}`));
          await refresh(true);
        } catch (error) {
          fill(status, notice(`Not killed: ${error.message}`, "error"));
        }
      }, kill));
      actions.append(kill, confirmBox);
    }
    if (allowed("POST /jobs/delete") && job.Status !== "Deleted") {
      const remove = h("button", {type: "button", class: "danger", id: "delete-job"}, "Delete this job");
      const confirmBox = h("div", {class: "confirm", hidden: true, role: "group", "aria-label": "Confirm delete"});
      remove.addEventListener("click", () => confirmInPlace(confirmBox,
        `Delete job ${jobId}? It leaves every list${FINAL.has(job.Status) ? "" : " (it is killed first)"}, and its output goes after the retention period.`,
        `Delete job ${jobId}`, async () => {
          try {
            const answer = await api("POST", "/jobs/delete", {job_ids: [jobId]});
            fill(status, notice(answer.deleted.length ? `Job ${jobId} deleted.` : `Not deleted: ${Object.values(answer.not_deleted).join("")}`));
            await refresh(true);
          } catch (error) {
            fill(status, notice(`Not deleted: ${error.message}`, "error"));
          }
        }, remove));
      actions.append(remove, confirmBox);
    }
    // Hold a job that has not started (the user hold, qhold -h u; a Matched one is taken back from its
    // pilot), release a held one (every hold the caller may).
    const control = (job.Status === "Waiting" || job.Status === "Matched") && allowed("POST /jobs/hold") ? ["hold", "Hold this job", "held", "not_held"]
      : job.Status === "Held" && allowed("POST /jobs/release") ? ["release", "Release this job", "released", "not_released"]
        : ENDED.has(job.Status) && allowed("POST /jobs/reschedule") ? ["reschedule", "Reschedule this job", "rescheduled", "not_rescheduled"]
          : null;
    if (control) {
      const [verb, label, done, refused] = control;
      const reason = h("input", {type: "text", id: `${verb}-reason`, maxlength: 256, autocomplete: "off"});
      const button = h("button", {type: "button", id: `${verb}-job`}, label);
      button.addEventListener("click", async () => {
        try {
          const answer = await api("POST", `/jobs/${verb}`, {job_ids: [jobId], ...(reason.value.trim() ? {reason: reason.value.trim()} : {})});
          const left = {...(answer.still_held ?? {}), ...answer[refused]};
          fill(status, notice(answer[done].length ? `Job ${jobId} ${done}.` : `Not ${done}: ${Object.values(left).join("")}`));
          await refresh(true);
        } catch (error) {
          fill(status, notice(`Not ${done}: ${error.message}`, "error"));
        }
      });
      actions.append(h("label", {for: `${verb}-reason`}, "Reason"), reason, button);
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
        whySection.hidden = !WAITS.has(job.Status);
        showWhere(job);
        if ((!last || job.Status === "Held" || last.Status === "Held") && !whySection.hidden) await loadWhy();
      }
      last = job;
      clearTimeout(timer);     // one loop, also after an action's refresh(true)
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
