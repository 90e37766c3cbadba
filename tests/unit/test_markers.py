from __future__ import annotations

import json

from airflow_provider_ctas.core import markers

TXN = "0123456789abcdef0123456789abcdef"


def test_reserved_names_parse_back():
    assert markers.parse_reserved_name(markers.staging_name(TXN, 12)) == markers.ReservedName(
        "0123456789abcdef", "staging", 12
    )
    backup = markers.parse_reserved_name(markers.backup_name(TXN, 1))
    assert backup is not None and backup.role == "backup"
    for name in ("orders", "__ctas_0123_s1", "__ctas_0123456789abcdef_x1", "__ctas_0123456789abcdef_s"):
        assert markers.parse_reserved_name(name) is None


def test_ownership_needs_the_exact_transaction_and_try():
    props = {markers.TXN_ID: TXN, markers.TRY_NUMBER: "2"}
    assert markers.owned_by(props, TXN)
    assert markers.owned_by(props, TXN, up_to_try=2)
    assert not markers.owned_by(props, TXN, up_to_try=1)
    assert not markers.owned_by(props, TXN[:-1] + "0")
    assert not markers.owned_by({}, TXN)
    assert not markers.owned_by({markers.TXN_ID: TXN, markers.TRY_NUMBER: "x"}, TXN, up_to_try=5)


def test_marker_file():
    marker = markers.MarkerFile(TXN, 3, "spark_catalog.db.t", "now")
    assert markers.MarkerFile.parse(marker.to_json()) == marker
    published = markers.MarkerFile(TXN, 3, "spark_catalog.db.t", "now", published_at="later")
    assert markers.MarkerFile.parse(published.to_json()) == published
    for bad in (None, "", "nope", "[]", '{"txn_id": 1, "try_number": 2}', '{"txn_id": "x", "try_number": 2}'):
        assert markers.MarkerFile.parse(bad) is None


def test_retained_versions_round_trip_in_the_marker_and_garbage_is_dropped():
    kept = markers.Retained("/w/db/__ctas_x_s1", "2024-01-01T01:00:00+00:00")
    marker = markers.MarkerFile("t" * 32, 2, "spark_catalog.db.t", "2024-01-01T00:00:00+00:00", retained=(kept,))
    assert markers.MarkerFile.parse(marker.to_json()) == marker
    data = json.loads(marker.to_json())
    data["retained"] = [{"path": 1, "delete_after": "x"}, "junk", {"path": "/p", "delete_after": "2024-01-02"}]
    parsed = markers.MarkerFile.parse(json.dumps(data))
    assert parsed is not None and parsed.retained == (markers.Retained("/p", "2024-01-02"),)
    # A marker written before retention existed has none.
    del data["retained"]
    old = markers.MarkerFile.parse(json.dumps(data))
    assert old is not None and old.retained == ()


def test_superseded_record_parses_only_complete_records():
    record = markers.SupersededRecord(
        "spark_catalog.db.t", "2024-01-01T00:00:00+00:00", "2024-01-01T01:00:00+00:00", "t:2"
    )
    assert markers.SupersededRecord.parse(record.to_json()) == record
    assert markers.SupersededRecord.parse('{"target": "x"}') is None
    assert markers.SupersededRecord.parse("not json") is None
    assert markers.parse_time("garbage") is None
    naive = markers.parse_time("2024-01-01T00:00:00")
    assert naive is not None and naive.tzinfo is not None


def test_a_revoked_marker_keeps_its_owner_and_says_by_which_try():
    marker = markers.MarkerFile("txn", 1, "db.t", "2024-01-01T00:00:00+00:00", revoked_by=2)
    parsed = markers.MarkerFile.parse(marker.to_json())
    assert parsed == marker and parsed.txn_id == "txn" and parsed.revoked_by == 2
    garbled = markers.MarkerFile.parse(marker.to_json().replace('"revoked_by": 2', '"revoked_by": "2"'))
    assert garbled is not None and garbled.revoked_by is None
