//! The parts of Go's `strconv` that decide what the installer makes of a YAML number: parsing
//! (atoi.go, atof.go) and float32 formatting (ftoa.go, ftoaryu.go).

/// Go `strconv.FormatFloat(f, 'g', -1, 32)` (ftoa.go `genericFtoa`, `formatDigits`): rounded to
/// float32, the shortest digits that read back as that float32, `%e` when the decimal exponent is
/// below -4 or at least 6 (the shortest-mode precision), else `%f`. Go converts with `float32(val)`,
/// which rounds to nearest even and gives ±Inf past float32's range, as Rust's `as f32` does.
pub(super) fn format_float32(f: f64) -> String {
    let f = f as f32;
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0");
    }
    let (digits, exp) = shortest_digits(f.abs());
    let nd = digits.len() as i32;
    let dp = exp + 1; // the decimal point's position in `digits`
    let digit = |i: i32| usize::try_from(i).ok().and_then(|i| digits.get(i)).map_or('0', |d| char::from(*d));
    let mut out = String::from(sign);
    if !(-4..6).contains(&exp) {
        // fmtE with prec = nd-1: all digits, and an exponent of at least two digits.
        out.push(digit(0));
        if nd > 1 {
            out.push('.');
            (1..nd).for_each(|i| out.push(digit(i)));
        }
        out.push_str(&format!("e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs()));
    } else {
        // fmtF with prec = max(nd-dp, 0).
        if dp > 0 {
            (0..dp).for_each(|i| out.push(digit(i)));
        } else {
            out.push('0');
        }
        let prec = (nd - dp).max(0);
        if prec > 0 {
            out.push('.');
            (0..prec).for_each(|i| out.push(digit(dp + i)));
        }
    }
    out
}

/// The shortest decimal digits that read back as the positive, finite `f`, and the decimal
/// exponent of the first: Go's `ryuFtoaShortest` (ftoaryu.go). Rust's `{:e}` finds the same
/// length and, but for one case, the same digits: when `f` lies exactly halfway between two
/// candidates, Rust rounds up and Go rounds to the even digit (`ryuDigits32`: "round up if ... the
/// new value of m is odd"). A tie shows in `f`'s exact expansion (a float32 has at most 112
/// significant digits, so 120 digits print it exactly): one digit more than the shortest, a 5.
/// Rounding down cannot leave the rounding interval: it is symmetric except at a power of two,
/// and no power of two ties (checked against Go for all of them).
fn shortest_digits(f: f32) -> (Vec<u8>, i32) {
    fn split(sci: &str) -> (Vec<u8>, i32) {
        let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
        let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
        while digits.len() > 1 && digits.last() == Some(&b'0') {
            digits.pop();
        }
        (digits, exp.parse().unwrap_or(0))
    }
    let (mut digits, exp) = split(&format!("{f:e}"));
    let (exact, exact_exp) = split(&format!("{:.120e}", f64::from(f)));
    let n = digits.len();
    let tie = exact_exp == exp && exact.len() == n + 1 && exact.last() == Some(&b'5');
    if tie && digits.last().is_some_and(|d| (d - b'0') % 2 == 1) {
        let mut down = digits.clone();
        if let Some(last) = down.last_mut() {
            *last -= 1;
        }
        // Only when Rust's digits are that tie rounded up.
        if exact[..n] == down[..] {
            while down.len() > 1 && down.last() == Some(&b'0') {
                down.pop();
            }
            digits = down;
        }
    }
    (digits, exp)
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum NumError {
    Syntax,
    Range,
}

/// Go `strconv.ParseUint(s, base, 64)` (atoi.go) for base 0 or 2..=36. Base 0 takes the base from
/// the prefix (`0b`, `0o`, `0x`, `0` for octal, else decimal) and allows underscores as
/// `underscoreOK` does; no sign.
pub(super) fn go_parse_uint(s: &str, base: u32) -> Result<u64, NumError> {
    let b = s.as_bytes();
    if b.is_empty() {
        return Err(NumError::Syntax);
    }
    let base0 = base == 0;
    let (base, digits): (u64, &[u8]) = match b {
        _ if !base0 => (u64::from(base), b),
        [b'0', p, _, ..] if p | 0x20 == b'b' => (2, &b[2..]),
        [b'0', p, _, ..] if p | 0x20 == b'o' => (8, &b[2..]),
        [b'0', p, _, ..] if p | 0x20 == b'x' => (16, &b[2..]),
        [b'0', ..] => (8, &b[1..]),
        _ => (10, b),
    };
    let mut underscores = false;
    let mut n: u64 = 0;
    for &c in digits {
        let d = match c {
            b'_' if base0 => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => c - b'0',
            _ if (c | 0x20).is_ascii_lowercase() => (c | 0x20) - b'a' + 10,
            _ => return Err(NumError::Syntax),
        };
        if u64::from(d) >= base {
            return Err(NumError::Syntax);
        }
        n = n.checked_mul(base).and_then(|n| n.checked_add(u64::from(d))).ok_or(NumError::Range)?;
    }
    if underscores && !underscore_ok(s) {
        return Err(NumError::Syntax);
    }
    Ok(n)
}

/// Go `strconv.ParseInt(s, base, 64)`: an optional sign, then [`go_parse_uint`] within int64's range.
pub(super) fn go_parse_int(s: &str, base: u32) -> Result<i64, NumError> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let un = go_parse_uint(rest, base)?;
    if neg {
        0i64.checked_sub_unsigned(un).ok_or(NumError::Range)
    } else {
        i64::try_from(un).map_err(|_| NumError::Range)
    }
}

/// Go `strconv.ParseFloat(s, 64)` for decimal text (atof.go `readFloat`, `atof64`): an optional
/// sign, digits with at most one `.` and at least one digit, an optional exponent, nothing after;
/// underscores as `underscoreOK` allows; out of range (±Inf) is an error, underflow is 0.
/// Hexadecimal and `inf`/`nan` text cannot reach its callers (`resolve` only calls it on text that
/// starts with `.` or matches `yamlStyleFloat`), so they are not accepted.
pub(super) fn go_parse_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let (mut saw_digits, mut saw_dot, mut underscores) = (false, false, false);
    while let Some(&c) = b.get(i) {
        match c {
            b'_' => underscores = true,
            b'.' if !saw_dot => saw_dot = true,
            b'0'..=b'9' => saw_digits = true,
            _ => break,
        }
        i += 1;
    }
    if !saw_digits {
        return None;
    }
    if b.get(i).is_some_and(|c| c | 0x20 == b'e') {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit() || **c == b'_') {
            underscores |= c == b'_';
            i += 1;
        }
    }
    if i != b.len() || (underscores && !underscore_ok(s)) {
        return None;
    }
    let f: f64 = s.replace('_', "").parse().ok()?;
    f.is_finite().then_some(f)
}

/// Go `strconv.underscoreOK`: underscores only between digits, or between a base prefix and a digit.
pub(super) fn underscore_ok(s: &str) -> bool {
    let mut b = s.as_bytes();
    if let [b'+' | b'-', rest @ ..] = b {
        b = rest;
    }
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if let [b'0', p, ..] = b {
        if matches!(p | 0x20, b'b' | b'o' | b'x') {
            i = 2;
            saw = b'0';
            hex = p | 0x20 == b'x';
        }
    }
    for &c in &b[i..] {
        if c.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&(c | 0x20))) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}
