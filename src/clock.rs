//! Time as plain numbers: the cores take `now` as an argument, so replay can run on the
//! records' own timestamps and the daemon on the machine's clocks.
//!
//! RFC 3339 parsing and formatting for machines are done here by hand: transcripts only
//! ever carry UTC or fixed-offset timestamps. What people read is in their own zone,
//! which needs the time-zone database: that is jiff's ([`local_time`]).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A moment as the cores see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Milliseconds on a monotonic scale: what settle timers are measured on.
    pub mono: u64,
    /// Unix milliseconds: what `ts` fields show.
    pub wall: i64,
}

impl Now {
    /// Virtual time, for replay: both scales are the record clock.
    pub fn virtual_at(wall: i64) -> Self {
        Now {
            mono: u64::try_from(wall).unwrap_or(0),
            wall,
        }
    }
}

/// The daemon's clocks: monotonic milliseconds since it started, and the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// Starts the monotonic scale at zero now.
    pub fn start() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    pub fn now(&self) -> Now {
        Now {
            mono: u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX),
            wall: wall_now(),
        }
    }

    /// The instant of a monotonic moment.
    pub fn instant(&self, mono: u64) -> Instant {
        self.start + Duration::from_millis(mono)
    }
}

/// Unix milliseconds of the system clock.
pub fn wall_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn num(b: &[u8]) -> Option<i64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (a space may stand for `T`) into Unix
/// milliseconds. Anything else is `None`: a record's time is a hint, never a reason to fail.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(&b[0..4])?, num(&b[5..7])?, num(&b[8..10])?);
    let (h, mi, se) = (num(&b[11..13])?, num(&b[14..16])?, num(&b[17..19])?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let frac = &b[start..i];
        if frac.is_empty() {
            return None;
        }
        let mut digits = [b'0'; 3];
        for (slot, d) in digits.iter_mut().zip(frac) {
            *slot = *d;
        }
        ms = num(&digits)?;
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let m = num(&b[i + 1..i + 3])? * 60 + num(&b[i + 4..i + 6])?;
            if *sign == b'-' { -m } else { m }
        }
        None => 0,
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs * 1000 + ms)
}

/// Formats Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (h, min, sec) = (sod / 3600, (sod / 60) % 60, sod % 60);
    let Ok(y4) = u16::try_from(y).map(i64::from) else {
        return format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{sec:02}.{milli:03}Z");
    };
    if y4 > 9999 {
        return format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{sec:02}.{milli:03}Z");
    }
    // By hand: every `status` and `scan` row formats one, and `format!` costs more
    // than the rest of the row's numbers together.
    let mut b = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, n: i64, digits: usize| {
        let mut n = n;
        for i in (at..at + digits).rev() {
            b[i] = b'0' + u8::try_from(n % 10).unwrap_or(0);
            n /= 10;
        }
    };
    put(0, y4, 4);
    put(5, m, 2);
    put(8, d, 2);
    put(11, h, 2);
    put(14, min, 2);
    put(17, sec, 2);
    put(20, milli, 3);
    String::from_utf8_lossy(&b).into_owned()
}

/// Unix milliseconds as a person reads them: the time of day in the system's zone (`TZ`
/// honoured, via jiff's system time-zone lookup), with the zone's abbreviation, e.g.
/// `10:24 CEST`, or `10:24:05 CEST` with `seconds`. A day away from `now` adds the date
/// (`2026-03-01 10:24 CET`). Machines get [`format_rfc3339`], always UTC.
pub fn local_time(ms: i64, now: i64, seconds: bool) -> String {
    local_time_in(&jiff::tz::TimeZone::system(), ms, now, seconds)
}

/// [`local_time`] in the zone `tz`.
pub fn local_time_in(tz: &jiff::tz::TimeZone, ms: i64, now: i64, seconds: bool) -> String {
    let Ok(at) = jiff::Timestamp::from_millisecond(ms) else {
        return format_rfc3339(ms);
    };
    let at = at.to_zoned_datetime(tz.clone());
    let same_day = jiff::Timestamp::from_millisecond(now)
        .map(|n| n.to_zoned_datetime(tz.clone()).date() == at.date())
        .unwrap_or(false);
    let clock = if seconds { "%H:%M:%S" } else { "%H:%M" };
    let fmt = if same_day {
        format!("{clock} %Z")
    } else {
        format!("%Y-%m-%d {clock} %Z")
    };
    at.strftime(&fmt).to_string()
}

/// How long ago `then` was at `now`, for tables: `just now`, `3 min ago`, `5 h ago`,
/// `12 days ago`.
pub fn age(then: i64, now: i64) -> String {
    let s = (now - then).max(0) / 1000;
    match s {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        86_400..172_800 => "1 day ago".to_owned(),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// [`parse_duration_ms`] for a value that must be longer than zero.
pub fn parse_positive_duration_ms(s: &str) -> Result<u64, String> {
    match parse_duration_ms(s)? {
        0 => Err(format!("`{s}` must be longer than zero")),
        ms => Ok(ms),
    }
}

/// Parses a human duration such as `500ms`, `30s`, `2m`, `1h` or a bare number of seconds.
/// [`parse_duration_ms`] that insists on a unit, where a bare number would be
/// misread (`--for 10` is not ten seconds to a person who meant minutes).
pub fn parse_duration_unit_ms(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!("`{t}` has no unit (say 90s, 30m or 1h)"));
    }
    parse_duration_ms(t)
}

pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (try 500ms, 30s, 2m)"))?;
    let factor = match unit.trim() {
        "ms" => 1.0,
        "" | "s" | "sec" | "secs" => 1000.0,
        "m" | "min" | "mins" => 60_000.0,
        "h" => 3_600_000.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{s}` (use ms, s, m or h)"
            ));
        }
    };
    let ms = n * factor;
    if !ms.is_finite() || !(0.0..=1e15).contains(&ms) {
        return Err(format!("`{s}` is out of range"));
    }
    // Durations are small positive whole numbers of ms after the checks above.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(ms.round() as u64)
}

#[cfg(test)]
mod tests {

    #[test]
    fn local_times_carry_their_zone_and_a_date_when_not_today() {
        let madrid = jiff::tz::TimeZone::get("Europe/Madrid").expect("tzdb");
        let at = parse_rfc3339("2026-01-01T22:45:00.000Z").expect("parse");
        let summer = parse_rfc3339("2026-07-01T08:21:58.000Z").expect("parse");
        assert_eq!(local_time_in(&madrid, at, at, false), "23:45 CET");
        assert_eq!(
            local_time_in(&madrid, summer, summer, true),
            "10:21:58 CEST"
        );
        let day_before = at - 86_400_000;
        assert_eq!(
            local_time_in(&madrid, at, day_before, false),
            "2026-01-01 23:45 CET"
        );
        assert_eq!(
            local_time_in(&jiff::tz::TimeZone::UTC, at, at, false),
            "22:45 UTC"
        );
    }

    #[test]
    fn ages_for_tables() {
        let now = 1_000_000_000_000;
        assert_eq!(age(now - 59_000, now), "just now");
        assert_eq!(age(now + 5_000, now), "just now");
        assert_eq!(age(now - 3 * 60_000 - 5_000, now), "3 min ago");
        assert_eq!(age(now - 5 * 3_600_000, now), "5 h ago");
        assert_eq!(age(now - 86_400_000, now), "1 day ago");
        assert_eq!(age(now - 12 * 86_400_000, now), "12 days ago");
    }

    use super::*;

    #[test]
    fn round_trips() {
        let t = parse_rfc3339("2026-02-11T21:36:41.090Z").unwrap();
        assert_eq!(format_rfc3339(t), "2026-02-11T21:36:41.090Z");
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2024-02-29T12:00:00.5+01:00"),
            parse_rfc3339("2024-02-29T11:00:00.500Z")
        );
        assert_eq!(
            parse_rfc3339("2026-08-03T11:20:00.123456789Z"),
            parse_rfc3339("2026-08-03T11:20:00.123Z")
        );
    }

    #[test]
    fn formats_as_jiff_does_across_the_range() {
        // Every year from 1 to 9999 and the edges past it, against jiff's own form.
        let mut ms = -62_135_596_800_000; // 0001-01-01T00:00:00Z
        while ms < 253_402_300_800_000 {
            let want = jiff::Timestamp::from_millisecond(ms)
                .unwrap()
                .strftime("%Y-%m-%dT%H:%M:%S.%3fZ")
                .to_string();
            assert_eq!(format_rfc3339(ms), want, "{ms}");
            assert_eq!(parse_rfc3339(&want), Some(ms), "{want}");
            ms += 9_876_543_210_987 / 1000 + 1;
        }
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(
            format_rfc3339(253_402_300_800_000),
            "10000-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn rejects_junk() {
        for s in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-01-01T00:00:00Zjunk",
            "2026-01-01T00:00:00.Z",
        ] {
            assert_eq!(parse_rfc3339(s), None, "{s}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("2m"), Ok(120_000));
        assert_eq!(parse_duration_ms("1.5"), Ok(1500));
        assert!(parse_duration_ms("soon").is_err());
        assert!(parse_duration_ms("5 parsecs").is_err());
    }
}
