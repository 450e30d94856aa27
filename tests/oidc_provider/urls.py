from django.contrib.auth import views as auth_views
from django.urls import include, path

from tests.oidc_provider import site

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(template_name="login.html")),
    # Before the library's own: the site's device views (RFC 8628 3.5 whole).
    path("o/token/", site.TokenView.as_view()),
    path("o/device-authorization/", site.DeviceAuthorizationView.as_view()),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
