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
    use super::parse_rfc3339_ms;

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
