// Signing in with the VO's identity provider: the OAuth 2.0 authorization code
// flow with PKCE (RFC 7636), as a browser application does it. The console is a
// public client: no secret, a one-time code verifier instead. What the flow
// needs across the round trip to the provider (state, verifier, token endpoint)
// waits in sessionStorage; the access token ends up where a pasted token does.

const FLOW = "wms.signin";

function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const random = (size) => base64url(crypto.getRandomValues(new Uint8Array(size)));

/** The console's own address, where the provider sends the person back (its redirect URI). */
const redirectUri = () => location.origin + location.pathname;

/** Leave for the provider's sign-in page. */
export async function start(provider) {
  const where = provider.Issuer.replace(/\/$/, "") + "/.well-known/openid-configuration";
  let discovery;
  try {
    discovery = await (await fetch(where)).json();
  } catch (error) {
    throw new Error(`the identity provider ${provider.Issuer} cannot be reached (${error.message})`);
  }
  if (!discovery.authorization_endpoint || !discovery.token_endpoint) {
    throw new Error(`the identity provider ${provider.Issuer} names no authorization or token endpoint`);
  }
  const verifier = random(32);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  const state = random(16);
  sessionStorage.setItem(FLOW, JSON.stringify({
    state, verifier, tokenEndpoint: discovery.token_endpoint, clientId: provider.ConsoleClientID,
    redirectUri: redirectUri(), issuer: provider.Issuer,
  }));
  const url = new URL(discovery.authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: "code", client_id: provider.ConsoleClientID, redirect_uri: redirectUri(), scope: provider.Scope,
    state, code_challenge: base64url(new Uint8Array(digest)), code_challenge_method: "S256",
  }).toString();
  location.assign(url.toString());
}

/** Back from the provider: the access token for the code in the address, or null when
    the address holds none. Throws, saying why, when the sign-in failed. */
export async function finish() {
  const params = new URLSearchParams(location.search);
  if (!params.has("code") && !params.has("error")) return null;
  const flow = JSON.parse(sessionStorage.getItem(FLOW) || "null");
  sessionStorage.removeItem(FLOW);
  history.replaceState(null, "", location.pathname + location.hash);   // the code is used once, and not kept
  if (params.has("error")) {
    throw new Error(`the identity provider refused: ${params.get("error_description") || params.get("error")}`);
  }
  if (!flow || params.get("state") !== flow.state) {
    throw new Error("this sign-in was not started from this tab (its state does not match): sign in again");
  }
  let response;
  try {
    response = await fetch(flow.tokenEndpoint, {method: "POST", body: new URLSearchParams({
      grant_type: "authorization_code", code: params.get("code"), redirect_uri: flow.redirectUri,
      client_id: flow.clientId, code_verifier: flow.verifier,
    })});
  } catch (error) {
    throw new Error(`the identity provider ${flow.issuer} cannot be reached (${error.message})`);
  }
  const answer = await response.json().catch(() => ({}));
  if (!response.ok || !answer.access_token) {
    throw new Error(`the identity provider ${flow.issuer} gave no token: ${answer.error_description || answer.error
      || response.status}`);
  }
  return answer.access_token;
}
