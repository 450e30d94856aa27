"""Advance reservations in Chromium against a real server (SQLite and
PostgreSQL): made in the form, seen in the list and in `qrstat`, changed as
qralter does, deleted as qrdel does; refused with qrsub's own messages; not
offered to a user outside arusers, whom qrsub refuses too."""

from __future__ import annotations

from datetime import datetime, timedelta

from playwright.sync_api import expect

from tests.web.conftest import grid_engine

FORM = "%Y-%m-%dT%H:%M:%S"   # a datetime-local field, in the browser's (this machine's) zone
QRSUB_TIME = "%Y%m%d%H%M"   # qrsub's [[CC]YY]MMDDhhmm


def test_a_reservation_made_in_the_form_is_listed_altered_and_deleted(console, console_server):
    tab = console()
    tab.sign_in(console_server.issued["admin"])
    tab.go("reservations", "Reservations")
    page = tab.page
    page.get_by_role("link", name="New reservation").click()
    page.get_by_role("heading", level=1, name="New reservation").wait_for()
    page.get_by_label("Duration (-d)").fill("1:00:00")
    page.get_by_label("Name (-N)").fill("night")
    page.get_by_label("Resources (-l)").fill("slots=1")
    page.get_by_label("Users (-u)").fill("admin,roland")
    tab.shot("08-reservation-form")
    page.get_by_role("button", name="Reserve").click()

    heading = page.get_by_role("heading", level=1, name="Advance reservation", exact=False)
    expect(heading).to_be_visible()
    ar_id = heading.inner_text().split()[-1]
    expect(page.locator("#ar-status")).to_have_text(f"Your advance reservation {ar_id} has been granted")
    expect(page.locator('[data-field="ar_name"] dd')).to_have_text("night")
    expect(page.locator('[data-field="acl_list"] dd')).to_have_text("admin,roland")
    tab.shot("09-reservation")

    listed = grid_engine(console_server, "qrstat")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:3] == [ar_id, "night", "admin"] for line in listed.stdout.splitlines()), listed.stdout

    # qralter: a new duration
    page.get_by_label("New duration (-d)").fill("2:00:00")
    page.get_by_role("button", name="Change").click()
    expect(page.locator("#ar-status")).to_have_text(f"admin modified advance reservation {ar_id}")
    expect(page.locator('[data-field="duration"] dd')).to_have_text("2:0:0")
    detail = grid_engine(console_server, "qrstat", "-ar", ar_id).stdout
    assert "\nduration:                   2:0:0\n" in detail, detail

    tab.go("reservations", "Reservations")
    row = page.get_by_role("region", name="Advance reservations (qrstat)").locator("tbody tr", has_text="night")
    expect(row.locator("td").nth(0)).to_have_text(ar_id)
    tab.shot("10-reservations")

    row.get_by_role("link", name=ar_id).click()
    page.get_by_role("button", name="Delete (qrdel)").click()
    page.get_by_role("button", name=f"Delete reservation {ar_id}").click()
    expect(page.get_by_role("heading", level=1, name="Reservations")).to_be_visible()
    expect(page.locator("#ar-status")).to_have_text(f"admin deleted advance reservation {ar_id}")
    expect(page.get_by_role("region", name="Advance reservations (qrstat)").locator("tbody tr",
                                                                                  has_text="night")).to_have_count(0)
    assert ar_id not in grid_engine(console_server, "qrstat").stdout.split()


def test_the_form_refuses_with_qrsubs_messages(console, console_server):
    tab = console()
    tab.sign_in(console_server.issued["admin"])
    tab.go("reservations/new", "New reservation")
    page = tab.page
    start = (datetime.now() + timedelta(hours=3)).replace(second=0, microsecond=0)
    end = start - timedelta(hours=1)
    page.get_by_label("Start (-a)").fill(start.strftime(FORM))
    page.get_by_label("End (-e)").fill(end.strftime(FORM))
    page.get_by_role("button", name="Reserve").click()
    qrsub = grid_engine(console_server, "qrsub", "-a", start.strftime(QRSUB_TIME), "-e", end.strftime(QRSUB_TIME))
    assert qrsub.returncode != 0
    said = qrsub.stderr.strip().removeprefix("qrsub: ")
    expect(page.get_by_role("alert")).to_have_text(said)
    tab.shot("11-reservation-refused")

    page.get_by_label("Start (-a)").fill("")
    page.get_by_label("End (-e)").fill("")
    page.get_by_label("Duration (-d)").fill("1:00:00")
    page.get_by_label("Resources (-l)").fill("slots")
    page.get_by_role("button", name="Reserve").click()
    qrsub = grid_engine(console_server, "qrsub", "-d", "1:00:00", "-l", "slots")
    assert qrsub.returncode == 2
    expect(page.get_by_role("alert")).to_have_text(qrsub.stderr.strip().removeprefix("qrsub: "))
    assert grid_engine(console_server, "qrstat").stdout.strip() == ""  # nothing was reserved


def test_a_user_outside_arusers_is_not_offered_the_form(console, console_server):
    tab = console()
    tab.sign_in(console_server.issued["roland"])
    tab.go("reservations", "Reservations")
    expect(tab.page.get_by_role("region", name="Advance reservations (qrstat)")).to_be_visible()
    expect(tab.page.get_by_role("link", name="New reservation")).to_have_count(0)
    tab.go("reservations/new", "Jobs")  # the form's address leads to the jobs
    refused = grid_engine(console_server, "qrsub", "-d", "1:00:00", token="roland")
    assert refused.returncode != 0 and "member of the arusers user set" in refused.stderr


def test_another_users_reservation_offers_no_change_and_no_delete(console, console_server):
    """roland may see admin's reservation (qrstat shows all), not change or
    delete it: the page offers neither, as the API would refuse both."""
    made = grid_engine(console_server, "qrsub", "-d", "1:00:00", "-N", "admins")
    assert made.returncode == 0, made.stderr
    ar_id = made.stdout.split()[3]                    # "Your advance reservation N has been granted"
    tab = console()
    tab.sign_in(console_server.issued["roland"])
    tab.go(f"reservations/{ar_id}", f"Advance reservation {ar_id}")
    page = tab.page
    expect(page.locator("#ar-not-yours")).to_have_text(
        "Only its owner (admin), operators and managers may change or delete this reservation.")
    expect(page.get_by_role("button", name="Delete (qrdel)")).to_have_count(0)
    expect(page.get_by_role("button", name="Change")).to_have_count(0)
    refused = grid_engine(console_server, "qrdel", ar_id, token="roland")
    assert refused.returncode != 0
    assert grid_engine(console_server, "qrdel", ar_id).returncode == 0
