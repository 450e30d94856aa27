"""Conditional debits of usage rows: all or, by the caller's rollback, none."""

from __future__ import annotations

import pytest

from wms.db import matching as match_db

@pytest.fixture(autouse=True)
def statement_form(engine):
    # MariaDB has no UPDATE .. RETURNING; it debits inside its claim procedure.
    if engine.dialect.name == "mysql":
        pytest.skip("MariaDB debits inside its claim procedure (tests/services/test_matcher.py)")


KEYS = [("global", "compiler_lic"), ("queue:A/B/c", "slots"), ("rqs:set/1:*", "slots")]


def test_all_debits_that_fit_are_taken(engine):
    with engine.begin() as conn:
        match_db.ensure_usage_rows(conn, KEYS)
        assert match_db.debit_all(conn, [(s, r, 1.0, 2.0) for s, r in KEYS]) is None
        assert [match_db.used(conn, s, r) for s, r in KEYS] == [1.0, 1.0, 1.0]


def test_the_one_that_does_not_fit_is_named_even_after_others_were_taken(engine):
    # The rows before it fit and were updated in this transaction; the answer
    # must still be the full one, so the reason names the right consumable.
    with engine.begin() as conn:
        match_db.ensure_usage_rows(conn, KEYS)
        match_db.debit_all(conn, [("rqs:set/1:*", "slots", 3.0, 3.0)])
    with engine.connect() as conn:
        with conn.begin() as tx:
            missed = match_db.debit_all(conn, [(s, r, 1.0, 3.0) for s, r in KEYS])
            assert missed == 2
            tx.rollback()
        assert [match_db.used(conn, s, r) for s, r in KEYS] == [0.0, 0.0, 3.0]
