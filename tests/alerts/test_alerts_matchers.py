"""Label matchers: Alertmanager 0.25's parser cases (pkg/labels/parse_test.go) and matching."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import Matcher, MatcherError, MatchType, format_matchers, parse_matcher, parse_matchers

EQ, NE, RE, NRE = MatchType.EQUAL, MatchType.NOT_EQUAL, MatchType.REGEX, MatchType.NOT_REGEX

# Every accepting case of upstream's TestMatchers, with its expected matchers.
UPSTREAM_ACCEPTED = [
    ('{foo="bar"}', [("foo", EQ, "bar")]),
    ('{foo=~"bar.*"}', [("foo", RE, "bar.*")]),
    ('{foo!="bar"}', [("foo", NE, "bar")]),
    ('{foo!~"bar.*"}', [("foo", NRE, "bar.*")]),
    ('{foo="bar", baz!="quux"}', [("foo", EQ, "bar"), ("baz", NE, "quux")]),
    ('{foo="bar", baz!~"quux.*"}', [("foo", EQ, "bar"), ("baz", NRE, "quux.*")]),
    (
        '{foo="bar",baz!~".*quux", derp="wat"}',
        [("foo", EQ, "bar"), ("baz", NRE, ".*quux"), ("derp", EQ, "wat")],
    ),
    (
        '{foo="bar", baz!="quux", derp="wat"}',
        [("foo", EQ, "bar"), ("baz", NE, "quux"), ("derp", EQ, "wat")],
    ),
    (
        '{foo="bar", baz!~".*quux.*", derp="wat"}',
        [("foo", EQ, "bar"), ("baz", NRE, ".*quux.*"), ("derp", EQ, "wat")],
    ),
    ('{foo="bar", instance=~"some-api.*"}', [("foo", EQ, "bar"), ("instance", RE, "some-api.*")]),
    ('{foo=""}', [("foo", EQ, "")]),
    ('{foo="bar,quux", job="job1"}', [("foo", EQ, "bar,quux"), ("job", EQ, "job1")]),
    ('{foo = "bar", dings != "bums", }', [("foo", EQ, "bar"), ("dings", NE, "bums")]),
    ("foo=bar,dings!=bums", [("foo", EQ, "bar"), ("dings", NE, "bums")]),
    (
        '{quote="She said: \\"Hi, ladies! That\'s gender-neutral…\\""}',
        [("quote", EQ, 'She said: "Hi, ladies! That\'s gender-neutral…"')],
    ),
    ('statuscode=~"5.."', [("statuscode", RE, "5..")]),
    ("tricky=~~~", [("tricky", RE, "~~")]),
    (r"trickier==\\=\=\"", [("trickier", EQ, r'=\=\="')]),
    (
        r'contains_quote != "\"" , contains_comma !~ "foo,bar" , ',
        [("contains_quote", NE, '"'), ("contains_comma", NRE, "foo,bar")],
    ),
    ("job=", [("job", EQ, "")]),
    # and the issue's own examples
    (
        '{alertname="X", severity=~"page|ticket"}',
        [("alertname", EQ, "X"), ("severity", RE, "page|ticket")],
    ),
    ("alertname=X", [("alertname", EQ, "X")]),
    ("", []),
    ("{}", []),
]

# Every rejecting case of upstream's TestMatchers, with a fragment of our message.
UPSTREAM_REJECTED = [
    ('job="value', "never closes"),
    ('job=value"', "unescaped double quote"),
    (r'trickier==\\=\=\""', "unescaped double quote"),
    ('contains_unescaped_quote = foo"bar', "unescaped double quote"),
    ('{invalid-name = "valid label"}', "bad matcher format"),
    ('{foo=~"invalid[regexp"}', "invalid regular expression"),
    (r'"{foo=\"bar"}', "bad matcher format"),
    (r'"foo=\"bar"', "bad matcher format"),
    (r'"foo=\"bar\""', "bad matcher format"),
    (r'"foo=\"bar\"', "bad matcher format"),
    (r'"{foo=\"bar\"}"', "bad matcher format"),
    ('"foo="bar""', "bad matcher format"),
    # ours: an empty matcher between commas, as upstream's tokenizer produces
    ("a=1,,b=2", "bad matcher format"),
]


@pytest.mark.parametrize(("text", "expected"), UPSTREAM_ACCEPTED)
def test_parses_like_alertmanager(text, expected):
    assert parse_matchers(text) == tuple(Matcher(*m) for m in expected)


@pytest.mark.parametrize(("text", "fragment"), UPSTREAM_REJECTED)
def test_rejects_like_alertmanager_with_the_matcher_named(text, fragment):
    with pytest.raises(MatcherError) as caught:
        parse_matchers(text)
    assert fragment in caught.value.problem
    # the error names the matcher as written (one token of the list)
    assert caught.value.text in text.strip("{}") or caught.value.text == ""


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("(?=x)y", "invalid perl operator"),  # lookahead
        ("(?<!x)y", "invalid perl operator"),  # lookbehind
        (r"(a)\1", "invalid escape sequence"),  # backreference
        ("(?P<n>a)(?P=n)", "invalid perl operator"),
        ("(a)?(?(1)b|c)", "invalid perl operator"),  # conditional group
        ("(?>ab)", "invalid perl operator"),  # atomic group
        ("a++", "bad repetition operator"),  # possessive
        ("a{1001}", "invalid repetition size"),
        ("a{2,1001}", "invalid repetition size"),
        ("(?x) a b", "invalid perl operator"),  # verbose flag
        ("(?x:a b)c", "invalid perl operator"),
        ("(a", "missing \\)"),
    ],
)
def test_regexes_outside_re2_are_refused(pattern, fragment):
    with pytest.raises(MatcherError, match=fragment):
        Matcher("x", RE, pattern)


def test_re2_constructs_are_accepted():
    for pattern in ("a{1000}", "a{2,}", "(?i)abc", "[a-z]+", "(?P<n>x)", r"\d+", "a|b", r"\{,3}"):
        Matcher("x", RE, pattern)


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("[[:alpha:]]+", "abc", True),  # a POSIX class in RE2, not a set of ":alph["
        ("[[:alpha:]]+", ":", False),
        ("a{,3}", "a{,3}", True),  # literal text in RE2 (and Go), not a repeat
        ("a{,3}", "aaa", False),
        ("(?i)é", "É", True),  # RE2 folds case across Unicode
    ],
)
def test_regexes_mean_what_they_mean_in_re2(pattern, value, expected):
    assert Matcher("x", RE, pattern).matches_value(value) is expected


@pytest.mark.parametrize(
    ("matcher", "value", "expected"),
    [
        (("code", RE, "5.."), "500", True),
        (("code", RE, "5.."), "1500", False),  # fully anchored
        (("code", RE, "5.."), "5000", False),
        (("code", RE, "5.."), "500\n", False),  # Python's "$" would accept this; fullmatch does not
        (("code", NRE, "5.."), "404", True),
        (("sev", RE, "page|ticket"), "ticket", True),
        (("sev", RE, "page|ticket"), "pageticket", False),
        (("d", RE, r"\d+"), "٣", False),  # RE2's \d is ASCII
        (("team", EQ, ""), "", True),
        (("team", NE, ""), "", False),
        (("team", NE, "a"), "", True),
    ],
)
def test_matching(matcher, value, expected):
    assert Matcher(*matcher).matches_value(value) is expected


def test_absent_label_matches_as_empty_string():
    assert Matcher("team", EQ, "").matches({"alertname": "X"})
    assert not Matcher("team", RE, ".+").matches({"alertname": "X"})
    assert Matcher("team", NE, "infra").matches({"alertname": "X"})


def test_string_form_is_alertmanagers_and_round_trips():
    matchers = parse_matchers(r'{a="x\"y", b=~"1|2", c!="line\nbreak", d!~"back\\slash"}')
    assert str(matchers[0]) == r'a="x\"y"'
    assert format_matchers(matchers).startswith('{a="x\\"y",b=~"1|2",')
    assert parse_matchers(format_matchers(matchers)) == matchers


def test_value_that_is_not_utf8_is_refused():
    with pytest.raises(MatcherError, match="not valid UTF-8"):
        parse_matchers('a="bad \udc80"')


def test_constructor_validates_name_and_type():
    with pytest.raises(MatcherError, match="not a valid label name"):
        Matcher("1x", EQ, "v")
    with pytest.raises(MatcherError, match="operator must be one of"):
        Matcher("x", "==", "v")  # type: ignore[arg-type]
    assert Matcher("x", "=~", "a").type is RE  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=()), max_size=40))  # surrogates included
def test_parser_never_raises_anything_but_matcher_error(text):
    try:
        matchers = parse_matchers(text)
    except MatcherError as error:
        assert error.text is not None
        return
    for matcher in matchers:
        matcher.matches({"x": text})


matcher_chars = st.sampled_from(list('ab=!~",{}\\ n.*|()[]+?'))


@settings(max_examples=300, deadline=None)
@given(st.text(matcher_chars, max_size=30))
def test_parser_on_syntax_heavy_strings(text):
    try:
        matchers = parse_matchers(text)
    except MatcherError:
        return
    assert parse_matchers(format_matchers(matchers)) == matchers


@settings(max_examples=100, deadline=None)
@given(
    st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True),
    st.sampled_from(list(MatchType)),
    st.text(
        st.characters(exclude_categories=("Cs",), exclude_characters="()[]{}*+?|\\^$."), max_size=15
    ),
)
def test_format_then_parse_is_identity(name, match_type, value):
    matcher = Matcher(name, match_type, value)
    assert parse_matcher(str(matcher)) == matcher
