"""What the site adds to django-oauth-toolkit (see __init__.py)."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta

from django import http
from django.conf import settings
from django.utils import timezone
from jwcrypto import jwk, jwt
from oauthlib.oauth2.rfc8628 import errors as rfc8628_errors
from oauth2_provider import views
from oauth2_provider.models import get_device_grant_model
from oauth2_provider.settings import oauth2_settings


def _signing_key() -> jwk.JWK:
    return jwk.JWK.from_pem(oauth2_settings.OIDC_RSA_PRIVATE_KEY.encode())


def access_token(request) -> str:
    """An access token as a WLCG-profile JWT, signed with the provider's active key
    (its kid the key's thumbprint, as the library's jwks_uri names it)."""
    key = _signing_key()
    now = int(time.time())
    client = settings.CLIENTS.get(request.client_id, {})
    lifetime = client.get("access_seconds", oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS)
    user = request.user
    scopes = list(getattr(request, "scopes", None) or [])
    claims = {
        "wlcg.ver": "1.0",
        "iss": settings.ISSUER,
        "sub": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{settings.ISSUER}/{user.username}")),
        "preferred_username": user.username,
        "aud": client.get("audience", settings.AUDIENCE),
        "iat": now,
        "nbf": now,
        "exp": now + lifetime,
        "jti": str(uuid.uuid4()),
        "client_id": request.client_id,
        "scope": " ".join(scopes),
    }
    if "wlcg.groups" in scopes:
        claims["wlcg.groups"] = sorted(group.name for group in user.groups.all())
    token = jwt.JWT(header={"alg": "RS256", "typ": "at+jwt", "kid": key.thumbprint()}, claims=claims)
    token.make_signed_token(key)
    return token.serialize()


class DeviceAuthorizationView(views.DeviceAuthorizationView):
    """The library's, with the device code's lifetime the site's (DEVICE_CODE_SECONDS)."""

    def post(self, request, *args, **kwargs):
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200:
            answer = json.loads(response.content)
            get_device_grant_model().objects.filter(device_code=answer["device_code"]).update(
                expires=timezone.now() + timedelta(seconds=settings.DEVICE_CODE_SECONDS))
            answer["expires_in"] = settings.DEVICE_CODE_SECONDS
            response = http.JsonResponse(answer)
        return response


class TokenView(views.TokenView):
    """The library's token endpoint, with RFC 8628 3.5's ``slow_down`` (a poll
    sooner than the interval; the interval then grows by 5 s) and
    ``expired_token`` (a device code past its end), open to pages of other
    origins (CORS), as providers open it to the web applications they serve."""

    def post(self, request, *args, **kwargs):
        response = super().post(request, *args, **kwargs)
        response["Access-Control-Allow-Origin"] = "*"
        return response

    def device_flow_token_response(self, request, device_code, *args, **kwargs):
        model = get_device_grant_model()
        device = model.objects.filter(device_code=device_code).first()
        if device is not None and device.status == device.AUTHORIZATION_PENDING:
            if device.is_expired():
                return _error(rfc8628_errors.ExpiredTokenError())
            if timezone.now() - device.last_checked < timedelta(seconds=device.interval):
                model.objects.filter(pk=device.pk).update(interval=device.interval + 5, last_checked=timezone.now())
                return _error(rfc8628_errors.SlowDownError())
            device.save(update_fields=["last_checked"])
        return super().device_flow_token_response(request, device_code, *args, **kwargs)


def _error(error) -> http.HttpResponse:
    return http.HttpResponse(content=error.json, status=error.status_code, content_type="application/json")
