"""A real OpenID provider for the tests: django-oauth-toolkit (an OAuth 2.0
and OpenID Connect server from PyPI) in a Django site of its own, started
as a process by tests/oidc.py.

What the site adds to the library, as a VO's identity provider (INDIGO
IAM, Keycloak) has it:

* access tokens that are JWTs of the WLCG token profile, signed by the
  provider with its active key (``OIDC_RSA_PRIVATE_KEY``, published at
  its jwks_uri with older keys still listed): site.access_token;
* the parts of RFC 8628 section 3.5 the library leaves out: ``slow_down``
  when a device polls faster than its interval, ``expired_token`` once the
  device code is past its end (site.TokenView), and a device code
  lifetime of the site's choosing;
* a token endpoint that pages of other origins may call (CORS), for the
  console's authorization code flow.
"""
