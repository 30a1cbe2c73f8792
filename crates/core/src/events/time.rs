//! RFC 3339 timestamps as the events carry them (EventBridge and CloudEvents `time`, CloudTrail
//! `eventTime`, Event Grid `eventTime` with up to seven fractional digits), as milliseconds since
//! the Unix epoch: the start of the compliance lag. Hand-written because the pure core takes no
//! date library for one field; anything it cannot read is `None`, never an error of the event.

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` → ms since the epoch (UTC).
pub fn parse_rfc3339_ms(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = s.get(from..to)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let first3 = format!("{:0<3}", &frac[..digits.min(3)]);
        millis = first3.parse::<i64>().ok()?;
        rest = &frac[digits..];
    }
    let offset_s = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(&rest[..1], "+" | "-") && &rest[3..4] == ":" => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let (h, m): (i64, i64) = (rest[1..3].parse().ok()?, rest[4..6].parse().ok()?);
            sign * (h * 3600 + m * 60)
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    u64::try_from(secs * 1000 + millis).ok()
}

/// `ms` since the epoch as RFC 3339 in UTC with milliseconds (`2026-11-25T12:00:00.123Z`), the
/// shape EventBridge's `time` and CloudTrail's `eventTime` take.
pub fn format_rfc3339_ms(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, ms % 1000)
}

/// The date of a day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::{format_rfc3339_ms, parse_rfc3339_ms};

    #[test]
    fn formatting_round_trips() {
        for ms in [0, 951_782_400_000, 1_764_072_000_123, 4_102_444_799_999] {
            let text = format_rfc3339_ms(ms);
            assert_eq!(parse_rfc3339_ms(&text), Some(ms), "{text}");
        }
        assert_eq!(format_rfc3339_ms(1_764_072_000_123), "2025-11-25T12:00:00.123Z");
    }

    #[test]
    fn the_shapes_the_events_carry() {
        // EventBridge / CloudTrail: whole seconds, Z.
        assert_eq!(parse_rfc3339_ms("2024-03-01T12:00:00Z"), Some(1_709_294_400_000));
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        // Event Grid: seven fractional digits.
        assert_eq!(parse_rfc3339_ms("2024-03-01T12:00:00.1234567Z"), Some(1_709_294_400_123));
        assert_eq!(parse_rfc3339_ms("2024-03-01T12:00:00.5Z"), Some(1_709_294_400_500));
        // CloudEvents may carry an offset.
        assert_eq!(parse_rfc3339_ms("2024-03-01T13:30:00+01:30"), Some(1_709_294_400_000));
        assert_eq!(parse_rfc3339_ms("2024-03-01T10:00:00-02:00"), Some(1_709_294_400_000));
        // Leap day, end of year.
        assert_eq!(parse_rfc3339_ms("2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        assert_eq!(parse_rfc3339_ms("2023-12-31T23:59:59Z"), Some(1_704_067_199_000));
    }

    #[test]
    fn anything_else_is_none() {
        for bad in [
            "",
            "2024-03-01",
            "2024-03-01T12:00:00",
            "2024-13-01T12:00:00Z",
            "2024-03-01T25:00:00Z",
            "2024-03-01T12:00:00.Z",
            "2024-03-01T12:00:00+0100",
            "yyyy-03-01T12:00:00Z",
            "1969-12-31T23:59:59Z",
            "2024-03-01T12:00:00Zjunk",
            "２０２４-03-01T12:00:00Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad:?}");
        }
    }
}
