//! Text forms of `datetime64` values: ISO 8601 parsing into a count of a [`TimeUnit`] (the
//! literals of conditions, CSV files of the CLI) and formatting back (error messages, JSON of
//! fill values, CSV exports).
//!
//! Accepted text: `[+-]YYYY[-MM[-DD[(T| )hh[:mm[:ss[.fffffffff]]]]]][Z]`, proleptic Gregorian
//! calendar, UTC, no leap seconds (numpy's rules), and `NaT`. A value finer than the unit (a
//! fraction of a second for unit `s`) is an error rather than silently truncated.

use super::datatype::{TimeUnit, NAT};

/// Days from 1970-01-01 to `year-month-day` (proleptic Gregorian): the civil-to-days formula
/// over 400-year eras of 146097 days, counting years from March so leap days come last.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `(year, month, day)` of the day `days` after 1970-01-01 (the inverse of
/// [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Reads `n` ASCII digits at the front of `s`.
fn digits(s: &mut &str, n: usize, what: &str) -> Result<i64, String> {
    let head = s.get(..n).filter(|h| h.bytes().all(|b| b.is_ascii_digit()));
    let head = head.ok_or_else(|| format!("expected {n} digits of the {what}"))?;
    *s = &s[n..];
    head.parse().map_err(|_| format!("bad {what}"))
}

/// Consumes `sep` at the front of `s`, if there.
fn eat(s: &mut &str, sep: &[char]) -> bool {
    match s.chars().next() {
        Some(c) if sep.contains(&c) => {
            *s = &s[c.len_utf8()..];
            true
        }
        _ => false,
    }
}

/// Nanoseconds since 1970-01-01T00:00 of an ISO 8601 text (see the module documentation).
fn parse_nanos(text: &str) -> Result<i128, String> {
    let mut s = text.trim();
    let neg = s.starts_with('-');
    if neg || s.starts_with('+') {
        s = &s[1..];
    }
    let year_len = s.bytes().take_while(u8::is_ascii_digit).count();
    if !(4..=6).contains(&year_len) {
        return Err("the year needs 4 to 6 digits".into());
    }
    let year = digits(&mut s, year_len, "year")? * if neg { -1 } else { 1 };
    let (mut month, mut day) = (1, 1);
    let (mut hour, mut minute, mut second, mut frac_ns) = (0i64, 0i64, 0i64, 0i64);
    if eat(&mut s, &['-']) {
        month = digits(&mut s, 2, "month")?;
        if eat(&mut s, &['-']) {
            day = digits(&mut s, 2, "day")?;
            if eat(&mut s, &['T', ' ']) {
                hour = digits(&mut s, 2, "hour")?;
                if eat(&mut s, &[':']) {
                    minute = digits(&mut s, 2, "minute")?;
                    if eat(&mut s, &[':']) {
                        second = digits(&mut s, 2, "second")?;
                        if eat(&mut s, &['.', ',']) {
                            let n = s.bytes().take_while(u8::is_ascii_digit).count();
                            if n == 0 || n > 9 {
                                return Err("a fraction of a second takes 1 to 9 digits".into());
                            }
                            frac_ns = digits(&mut s, n, "fraction")? * 10i64.pow(9 - n as u32);
                        }
                    }
                }
            }
        }
    }
    eat(&mut s, &['Z']);
    if !s.is_empty() {
        return Err(format!("unexpected {s:?} at the end"));
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err("no such date".into());
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("no such time of day".into());
    }
    let days = i128::from(days_from_civil(year, month, day));
    let secs = days * 86_400 + i128::from(hour * 3600 + minute * 60 + second);
    Ok(secs * 1_000_000_000 + i128::from(frac_ns))
}

/// The count of `unit` of an ISO 8601 date and time (`NaT` gives [`NAT`]).
///
/// # Errors
/// A text that is not a date, a value finer than `unit`, or one outside the range of `i64`
/// counts of `unit`: the message says which.
pub fn parse_datetime(text: &str, unit: TimeUnit) -> Result<i64, String> {
    if text.trim() == "NaT" {
        return Ok(NAT);
    }
    let ns = parse_nanos(text).map_err(|e| format!("{text:?} is not an ISO 8601 date and time: {e}"))?;
    let step = i128::from(unit.nanos());
    if ns % step != 0 {
        return Err(format!("{text:?} is finer than the unit {}", unit.code()));
    }
    i64::try_from(ns / step)
        .ok()
        .filter(|&v| v != NAT)
        .ok_or_else(|| format!("{text:?} is outside the range of datetime64[{}]", unit.code()))
}

/// The ISO 8601 text of `value` counts of `unit` ("NaT" for [`NAT`]), as precise as the unit.
pub fn format_datetime(value: i64, unit: TimeUnit) -> String {
    display_datetime(value, unit).to_string()
}

/// [`format_datetime`] as a [`Display`](std::fmt::Display) value: writes the text without
/// allocating (one value per cell of a CSV export).
pub fn display_datetime(value: i64, unit: TimeUnit) -> impl std::fmt::Display {
    Iso(value, unit)
}

/// A count of a unit, displayed as ISO 8601 text.
struct Iso(i64, TimeUnit);

impl std::fmt::Display for Iso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Iso(value, unit) = *self;
        if value == NAT {
            return f.write_str("NaT");
        }
        let ns = i128::from(value) * i128::from(unit.nanos());
        let day_ns = 86_400 * 1_000_000_000i128;
        // |value| < 2^63 units of at most a day: the day count fits in i64.
        let days = ns.div_euclid(day_ns) as i64;
        let rest = ns.rem_euclid(day_ns) as i64;
        let (y, m, d) = civil_from_days(days);
        let sign = if y < 0 {
            "-"
        } else if y > 9999 {
            "+"
        } else {
            ""
        };
        write!(f, "{sign}{:04}-{m:02}-{d:02}", y.abs())?;
        let (h, mi, s, frac) =
            (rest / 3_600_000_000_000, rest / 60_000_000_000 % 60, rest / 1_000_000_000 % 60, rest % 1_000_000_000);
        match unit {
            TimeUnit::Day => Ok(()),
            TimeUnit::Hour => write!(f, "T{h:02}"),
            TimeUnit::Minute => write!(f, "T{h:02}:{mi:02}"),
            TimeUnit::Second => write!(f, "T{h:02}:{mi:02}:{s:02}"),
            TimeUnit::Milli => write!(f, "T{h:02}:{mi:02}:{s:02}.{:03}", frac / 1_000_000),
            TimeUnit::Micro => write!(f, "T{h:02}:{mi:02}:{s:02}.{:06}", frac / 1_000),
            TimeUnit::Nano => write!(f, "T{h:02}:{mi:02}:{s:02}.{frac:09}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_dates() {
        assert_eq!(parse_datetime("1970-01-01", TimeUnit::Day), Ok(0));
        assert_eq!(parse_datetime("2020-01-01T00:00", TimeUnit::Second), Ok(1_577_836_800));
        assert_eq!(parse_datetime("1969-12-31T23:59:59.5", TimeUnit::Milli), Ok(-500));
        assert_eq!(parse_datetime("2000-02-29", TimeUnit::Day), Ok(11_016));
        assert_eq!(parse_datetime("2020", TimeUnit::Day), Ok(18_262));
        assert_eq!(parse_datetime("2020-03", TimeUnit::Day), Ok(18_322));
        assert_eq!(parse_datetime("1900-01-01 12:00Z", TimeUnit::Hour), Ok(-25_567 * 24 + 12));
        assert_eq!(parse_datetime("-0001-12-31", TimeUnit::Day), Ok(days_from_civil(-1, 12, 31)));
        assert_eq!(parse_datetime("NaT", TimeUnit::Nano), Ok(NAT));
        assert_eq!(format_datetime(-500, TimeUnit::Milli), "1969-12-31T23:59:59.500");
        assert_eq!(format_datetime(18_262, TimeUnit::Day), "2020-01-01");
        assert_eq!(format_datetime(NAT, TimeUnit::Second), "NaT");
    }

    #[test]
    fn bad_texts_say_why() {
        for (text, why) in [
            ("2021-02-29", "no such date"),
            ("2020-13-01", "no such date"),
            ("2020-01-01T24:00", "no such time"),
            ("20-01-01", "4 to 6 digits"),
            ("2020-01-01x", "unexpected"),
            ("2020-01-01T00:00:00.0000000001", "1 to 9 digits"),
        ] {
            let e = parse_datetime(text, TimeUnit::Nano).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        assert!(parse_datetime("2020-01-01T00:00:01", TimeUnit::Minute).unwrap_err().contains("finer"));
        assert!(parse_datetime("2300-01-01", TimeUnit::Nano).unwrap_err().contains("outside"));
    }

    proptest! {
        #[test]
        fn days_round_trip(days in -100_000_000i64..100_000_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert!((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m));
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }

        #[test]
        fn text_round_trips((unit, v) in (0usize..7).prop_flat_map(|u| {
            // Years of at most 6 digits: about 3e22 ns either side of 1970.
            let max = i64::try_from(30_000_000_000_000_000_000_000i128 / i128::from(TimeUnit::ALL[u].nanos()))
                .unwrap_or(i64::MAX);
            (Just(TimeUnit::ALL[u]), -max..max)
        })) {
            let text = format_datetime(v, unit);
            prop_assert_eq!(parse_datetime(&text, unit), Ok(v), "{}", text);
        }
    }
}
