"""The provider's Django settings; everything that changes from one test to the
next comes from the environment tests/oidc.py sets."""

import json
import os
from pathlib import Path

STATE = Path(os.environ["OP_STATE"])       # the provider's database and keys
ISSUER = os.environ["OP_ISSUER"]           # http://127.0.0.1:PORT/o

SECRET_KEY = "the test provider's own session key"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.oidc_provider.urls"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
              "DIRS": [Path(__file__).parent / "templates"],
              "OPTIONS": {"context_processors": ["django.template.context_processors.request"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(STATE / "provider.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]     # test users: fast sign-in

_keys = json.loads((STATE / "keys.json").read_text())     # [active PEM, older PEMs...]
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": _keys[0],
    "OIDC_RSA_PRIVATE_KEYS_INACTIVE": _keys[1:],
    "SCOPES": {"openid": "OpenID Connect", "offline_access": "refresh tokens", "wlcg.groups": "your VO groups",
               "compute.read": "read jobs", "compute.create": "submit jobs"},
    "DEFAULT_SCOPES": ["openid", "wlcg.groups"],
    "ACCESS_TOKEN_GENERATOR": "tests.oidc_provider.site.access_token",
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("OP_ACCESS_SECONDS", "3600")),
    "OAUTH_DEVICE_VERIFICATION_URI": ISSUER.rsplit("/o", 1)[0] + "/o/device/",
    "DEVICE_FLOW_INTERVAL": int(os.environ.get("OP_DEVICE_INTERVAL", "1")),
    "PKCE_REQUIRED": True,
}
DEVICE_CODE_SECONDS = int(os.environ.get("OP_DEVICE_SECONDS", "600"))
AUDIENCE = os.environ.get("OP_AUDIENCE", "")
# Per client: the audience its access tokens name (default AUDIENCE) and their lifetime.
CLIENTS = {c["client_id"]: c for c in json.loads((STATE / "seed.json").read_text())["clients"]}
TIME_ZONE = "UTC"
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"console": {"class": "logging.StreamHandler"}},
           "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}}}
