//! RFC 3339 timestamps without a date crate, in the forms each API writes.

/// Milliseconds since the Unix epoch, now.
pub fn now_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default()
}

/// `2026-11-29T06:55:27.123-08:00`: Compute writes its times in Pacific time with an offset
/// (captured describes: `"creationTimestamp": "2024-05-08T08:41:32.180-07:00"`); a fixed
/// -08:00 is the same instant whatever the daylight-saving rule.
pub fn rfc3339_pacific(millis: u64) -> String {
    format!("{}-08:00", civil(millis as i64 - 8 * 3_600_000))
}

/// `2026-11-29T14:55:27.123Z`, as Cloud Storage and DNS write theirs.
pub fn rfc3339_utc(millis: u64) -> String {
    format!("{}Z", civil(millis as i64))
}

/// `YYYY-MM-DDTHH:MM:SS.mmm` of `ms` since the epoch (the core's days-to-civil conversion).
fn civil(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = tagwarden_core::events::civil_from_days(days);
    let (h, mi, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}")
}

#[cfg(test)]
#[test]
fn known_instants() {
    assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339_utc(1_709_251_200_123), "2024-03-01T00:00:00.123Z");
    assert_eq!(rfc3339_pacific(1_709_251_200_000), "2024-02-29T16:00:00.000-08:00");
}
