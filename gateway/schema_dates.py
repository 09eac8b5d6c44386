"""Gateway process: the dates, times and durations a grammar writes for JSON Schema's `date`, `date-time`, `time` and
`duration` formats.

llguidance's rules for them let 29 February through in every year (2023-02-29), and year 0000 and second 60: the random
tiny model wrote "2023-02-29" for a `format: date` field, which JSON Schema's own `date` check (jsonschema's
FormatChecker, RFC 3339 section 5.7: the 29th only in leap years) refuses, and pydantic (the OpenAI SDK's
`chat.completions.parse`, Ollama's structured-output examples, `model_validate_json`) refuses all three ("day value is
outside expected range", "year 0 is out of range", "second value is outside expected range"). The grammar copy of such
a string gets a `pattern` beside its format (llguidance enforces both) that allows only real calendar dates, years
0001-9999, seconds 00-59, an upper-case `T` and `Z` and at most 9 fraction digits (nanoseconds, Go's RFC3339Nano):
every value it allows is a valid RFC 3339 date, date-time or time, and one Python's datetime, pydantic and Go's
time.Parse read.
"""
from __future__ import annotations

_YEAR = r"(000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d{3})"
# Divisible by 4 and not by 100, or by 400 (year 0000 left out, as by _YEAR).
_LEAP_YEAR = r"(\d\d(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_DATE = (rf"({_YEAR}-(0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|{_YEAR}-(0[469]|11)-(0[1-9]|[12]\d|30)"
         rf"|{_YEAR}-02-(0[1-9]|1\d|2[0-8])|{_LEAP_YEAR}-02-29)")
_TIME = r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"
# RFC 3339 appendix A's duration (P1Y2M3DT4H5M6S, P2W), each number at most 6 digits: llguidance's rule takes any
# number of digits, and pydantic refuses a timedelta past 999999999 days ("a numeric value in the duration is too
# large").
_N = r"\d{1,6}"
_DUR_TIME = rf"T({_N}H({_N}M({_N}S)?)?|{_N}M({_N}S)?|{_N}S)"
_DURATION = rf"P(({_N}D|{_N}M({_N}D)?|{_N}Y({_N}M({_N}D)?)?)({_DUR_TIME})?|{_DUR_TIME}|{_N}W)"
FORMAT_PATTERNS = {"date": f"^{_DATE}$", "date-time": f"^{_DATE}T{_TIME}$", "time": f"^{_TIME}$",
                   "duration": f"^{_DURATION}$"}


def pin_date_format(node: dict) -> None:
    """A string node of format date / date-time / time / duration (without a pattern of its own) gets FORMAT_PATTERNS'
    one."""
    pattern = FORMAT_PATTERNS.get(node.get("format"))
    if pattern and "pattern" not in node and node.get("type", "string") == "string":
        node["pattern"] = pattern
