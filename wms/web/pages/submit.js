// Submit a JDL from a text box; the server's errors come back with the line
// and column (`console.jdl:3:12: ...`) and are shown at that line.

import {api} from "../api.js";
import {h, fill, notice} from "../dom.js";
import {editor} from "../editor.js";

export const SOURCE = "console.jdl";
const EXAMPLE = `[
  Executable = "/bin/sh";
  Arguments = "-c 'echo hello'";
  JobName = "hello";
  CPUTime = 3600;
]`;

export function render(main, {go}) {
  const jdl = editor({label: "Job description (JDL)", text: EXAMPLE, rows: 14, source: SOURCE});
  const status = h("div", {"aria-live": "polite"});
  const form = h("form", {class: "card", id: "submit-form"}, jdl.element,
    h("div", {class: "actions"}, h("button", {type: "submit"}, "Submit")));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fill(status);
    try {
      const answer = await api("POST", "/jobs", {jdls: [{source: SOURCE, text: jdl.value}]});
      const ids = answer.job_ids;
      fill(status, notice(`Submitted: job${ids.length > 1 ? "s" : ""} ${ids.join(", ")}.`));
      if (ids.length === 1) go(`#/jobs/${ids[0]}`);
    } catch (error) {
      jdl.showError(error.message);
    }
  });
  fill(main, h("h1", {}, "Submit a job"),
    h("p", {}, "The JDL in ClassAd syntax, as `wms submit` reads it from a file; `Parameters = N` makes N jobs."),
    status, form);
}
