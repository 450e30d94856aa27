// Sign-in with the VO's identity provider (a button per provider the server
// offers: oidc.js), or with a bearer token (`wms admin token create`, or the one
// `wms up` wrote to ~/.config/wms/token). Either is checked with /whoami before
// it is kept, and kept in sessionStorage only: closing the browser session forgets it.

import {api} from "../api.js";
import {h, fill, field, notice} from "../dom.js";
import * as oidc from "../oidc.js";

/** A button per identity provider the console may sign in with (none when the server offers none). */
async function providerButtons(status) {
  let offered = [];
  try {
    offered = (await api("GET", "/auth/issuers", undefined, null)).Issuers.filter((p) => p.ConsoleClientID);
  } catch (error) {
    return null;   // the token form still works
  }
  if (!offered.length) return null;
  return h("div", {class: "card signin"}, ...offered.map((provider) => {
    const button = h("button", {type: "button"}, `Sign in with ${provider.VO} (${new URL(provider.Issuer).host})`);
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await oidc.start(provider);
      } catch (error) {
        fill(status, notice(`Not signed in: ${error.message}`, "error"));
        button.disabled = false;
      }
    });
    return button;
  }));
}

export function render(main, {onSignedIn, reason}) {
  const input = h("input", {type: "password", name: "token", autocomplete: "off", spellcheck: "false",
    required: true, id: "token"});
  const status = h("div", {"aria-live": "polite"}, reason ? notice(reason, "error") : null);
  const form = h("form", {class: "card signin", novalidate: true},
    field("Bearer token", input, "Kept for this browser session only."),
    h("button", {type: "submit"}, "Sign in"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) {
      fill(status, notice("Enter a token: `wms admin token create` prints one.", "error"));
      input.focus();
      return;
    }
    try {
      const who = await api("GET", "/whoami", undefined, token);
      await onSignedIn(token, who);
    } catch (error) {
      fill(status, notice(`Not signed in: ${error.message}`, "error"));
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  });
  fill(main, h("h1", {}, "Sign in"), status, form);
  input.focus();
  providerButtons(status).then((buttons) => {
    if (buttons && form.isConnected) form.before(buttons);
  });
}
