"""Label sets and Alertmanager's fingerprint (prometheus/common model/signature.go)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import LabelError, LabelSet, fingerprint, fingerprint_hex

SETTINGS = settings(max_examples=80, deadline=None)


def _reference_fnv1a_64(data: bytes) -> int:
    """FNV-1a 64 written from its definition (www.isthe.com/chongo/tech/comp/fnv), over the
    whole byte string at once, independent of the incremental code under test."""
    digest = 0xCBF29CE484222325
    for byte in data:
        digest ^= byte
        digest = (digest * 0x100000001B3) % 2**64
    return digest


def _reference_fingerprint(labels: dict[str, str]) -> int:
    data = b"".join(
        name.encode() + b"\xff" + labels[name].encode() + b"\xff" for name in sorted(labels)
    )
    return _reference_fnv1a_64(data)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        # prometheus/common model/signature_test.go TestLabelsToSignature / TestMetricToFingerprint
        ({}, 14695981039346656037),
        ({"name": "garland, briggs", "fear": "love is not enough"}, 5799056148416392346),
    ],
)
def test_fingerprint_matches_upstream_test_values(labels, expected):
    assert fingerprint(labels) == expected
    assert LabelSet(labels).fingerprint() == expected


def test_fnv_reference_matches_published_fnv1a_vectors():
    # FNV-1a 64 test vectors from the FNV reference code (test_fnv.c): "" and "a" and "foobar".
    assert _reference_fnv1a_64(b"") == 0xCBF29CE484222325
    assert _reference_fnv1a_64(b"a") == 0xAF63DC4C8601EC8C
    assert _reference_fnv1a_64(b"foobar") == 0x85944171F73967E8


def test_fingerprint_hex_is_sixteen_lower_case_digits():
    assert fingerprint_hex(0) == "0000000000000000"
    assert fingerprint_hex(5799056148416392346) == "507a62d79ee76c9a"
    assert fingerprint_hex(2**64 - 1) == "ffffffffffffffff"


def test_separator_keeps_name_value_boundaries_apart():
    assert fingerprint({"a": "bc"}) != fingerprint({"ab": "c"})
    assert fingerprint({"a": "b", "c": "d"}) != fingerprint({"a": "bcd"})


label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True)
label_values = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)


@SETTINGS
@given(st.dictionaries(label_names, label_values, max_size=8))
def test_fingerprint_equals_reference_and_ignores_order(labels):
    non_empty = {k: v for k, v in labels.items() if v}
    expected = _reference_fingerprint(non_empty)
    assert LabelSet(labels).fingerprint() == expected
    assert LabelSet(list(reversed(list(labels.items())))).fingerprint() == expected


def test_empty_values_are_dropped_as_in_promql():
    assert LabelSet({"a": "1", "b": ""}) == LabelSet({"a": "1"})
    assert "b" not in LabelSet({"a": "1", "b": ""})
    assert LabelSet({"a": "1"}).get_value("missing") == ""


@pytest.mark.parametrize(
    ("labels", "field", "fragment"),
    [
        ({"1abc": "x"}, "labels", "not a valid label name"),
        ({"a-b": "x"}, "labels", "not a valid label name"),
        ({"a:b": "x"}, "labels", "not a valid label name"),
        ({"": "x"}, "labels", "not a valid label name"),
        ({"ok": 3}, "labels", "value must be a string"),
        ({"ok": "bad \udc80 surrogate"}, "labels", "not valid UTF-8"),
    ],
)
def test_invalid_labels_name_the_field_and_label(labels, field, fragment):
    with pytest.raises(LabelError) as caught:
        LabelSet(labels, field)
    assert fragment in str(caught.value)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: label ")


def test_duplicate_names_in_pairs_are_rejected():
    with pytest.raises(LabelError, match="given twice"):
        LabelSet([("a", "1"), ("a", "2")], "annotations")


def test_label_set_is_an_immutable_hashable_mapping():
    labels = LabelSet({"b": "2", "a": "1"})
    assert list(labels) == ["a", "b"]
    assert labels.pairs == (("a", "1"), ("b", "2"))
    assert {labels: 1}[LabelSet({"a": "1", "b": "2"})] == 1
    assert labels == {"a": "1", "b": "2"}
    assert labels != {"a": "1"}
    assert labels.merged({"c": "3", "a": "9"}).as_dict() == {"a": "9", "b": "2", "c": "3"}
    with pytest.raises(TypeError):
        labels["a"] = "x"  # type: ignore[index]
