"""``python -m tests.oidc_provider PORT USERS_JSON``: migrate the provider's database,
make its users, groups and clients (again: each start makes them as told), and
serve on 127.0.0.1:PORT until killed."""

import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.oidc_provider.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from oauth2_provider.models import Application  # noqa: E402


def seed(users: list[dict], clients: list[dict]) -> None:
    for entry in users:
        user, _ = User.objects.get_or_create(username=entry["username"])
        user.set_password(entry["password"])
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in entry["groups"]])
    for entry in clients:
        Application.objects.update_or_create(client_id=entry["client_id"], defaults={
            "name": entry["client_id"], "client_type": Application.CLIENT_PUBLIC,
            "authorization_grant_type": entry["grant"], "redirect_uris": entry.get("redirect_uris", ""),
            "skip_authorization": False, "algorithm": Application.RS256_ALGORITHM})


def main() -> None:
    port, seed_file = int(sys.argv[1]), sys.argv[2]
    call_command("migrate", verbosity=0, interactive=False)
    wanted = json.loads(open(seed_file).read())
    seed(wanted["users"], wanted["clients"])
    call_command("runserver", f"127.0.0.1:{port}", use_reloader=False, use_threading=True, skip_checks=True)


if __name__ == "__main__":
    main()
