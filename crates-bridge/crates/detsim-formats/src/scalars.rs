// The domain scalars of the session protocol (docs/spec/scalars.md) as in
// core/formats/scalars.ts: Id, U64, Digest, RationalNs, Scope, request ids and i32.
// Readers refuse and name the field, never normalise. Not a schema library for whole messages.
use crate::error::{DetsimError, Reason, Result};
use crate::json::Value;
use std::cmp::Ordering;

pub const U64_MAX: u128 = u64::MAX as u128;

fn describe(value: Option<&Value>) -> String {
    match value {
        None => "nothing".to_string(),
        Some(v) => v.describe(),
    }
}

pub fn is_id(s: &str) -> bool {
    let b = s.as_bytes();
    let first_ok = matches!(b.first(), Some(b'a'..=b'z' | b'0'..=b'9'));
    first_ok
        && b.len() <= 64
        && b.iter()
            .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

pub fn check_id(s: &str, field: &str) -> Result<()> {
    if is_id(s) {
        return Ok(());
    }
    read_id(Some(&Value::String(s.to_string())), field).map(|_| ())
}

pub fn read_id<'a>(value: Option<&'a Value>, field: &str) -> Result<&'a str> {
    match value {
        Some(Value::String(s)) if is_id(s) => Ok(s),
        other => Err(DetsimError::at(
            Reason::StructInvalidId,
            format!(
                "{field}: {} is not an Id (1-64 of a-z 0-9 . _ -, starting with a letter or digit)",
                describe(other)
            ),
            field,
        )),
    }
}

/// A U64 decimal string: "0" or no leading zero, at most 18446744073709551615.
pub fn parse_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) || (b[0] == b'0' && b.len() > 1) {
        return None;
    }
    s.parse::<u64>().ok()
}

pub fn is_u64(s: &str) -> bool {
    parse_u64(s).is_some()
}

pub fn u64_error(value: Option<&Value>, field: &str) -> DetsimError {
    DetsimError::at(
        Reason::StructInvalidU64,
        format!(
            "{field}: {} is not a U64 (a decimal string, \"0\" or no leading zero, at most 18446744073709551615)",
            describe(value)
        ),
        field,
    )
}

pub fn read_u64(value: Option<&Value>, field: &str) -> Result<u64> {
    match value {
        Some(Value::String(s)) => parse_u64(s).ok_or_else(|| u64_error(value, field)),
        _ => Err(u64_error(value, field)),
    }
}

pub fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

pub fn read_digest<'a>(value: Option<&'a Value>, field: &str) -> Result<&'a str> {
    match value {
        Some(Value::String(s)) if is_digest(s) => Ok(s),
        other => Err(DetsimError::at(
            Reason::StructInvalidDigest,
            format!(
                "{field}: {} is not a SHA-256 digest (64 lowercase hex)",
                describe(other)
            ),
            field,
        )),
    }
}

pub fn read_request_id<'a>(value: Option<&'a Value>, field: &str) -> Result<&'a str> {
    match value {
        Some(Value::String(s)) if s.strip_prefix("req-").is_some_and(is_u64) => Ok(s),
        other => Err(DetsimError::at(
            Reason::StructInvalidField,
            format!("{field}: {} is not a request id req-<U64>", describe(other)),
            field,
        )),
    }
}

pub fn read_i32(value: Option<&Value>, field: &str) -> Result<i32> {
    match value {
        Some(Value::Number(n)) if n.fract() == 0.0 && *n >= i32::MIN as f64 && *n <= i32::MAX as f64 => Ok(*n as i32),
        other => Err(DetsimError::at(
            Reason::StructInvalidField,
            format!("{field}: {} is not a signed 32-bit integer", describe(other)),
            field,
        )),
    }
}

pub fn read_object<'a>(value: Option<&'a Value>, field: &str) -> Result<&'a [(String, Value)]> {
    match value {
        Some(Value::Object(members)) => Ok(members),
        other => Err(DetsimError::at(
            Reason::StructInvalidField,
            format!("{field}: {} is not an object", describe(other)),
            field,
        )),
    }
}

/// Refuse fields the schema does not define, the first in sorted (UTF-16) order, as TypeScript does.
pub fn refuse_unknown_fields(members: &[(String, Value)], allowed: &[&str], field: &str) -> Result<()> {
    let mut keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_by(|a, b| crate::json::compare_utf16(a, b));
    for key in keys {
        if !allowed.contains(&key) {
            let mut shown = String::new();
            crate::json::quote_string(key, &mut shown);
            return Err(DetsimError::at(
                Reason::StructUnknownField,
                format!("{field}: unknown field {shown}"),
                format!("{field}.{key}"),
            ));
        }
    }
    Ok(())
}

fn member<'a>(members: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    members.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

// ---------------------------------------------------------------------------------------------
// RationalNs: exact nanoseconds as a reduced fraction of U64s, with checked u128 arithmetic.

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn overflow(message: String, field: &str) -> DetsimError {
    DetsimError::at(Reason::StructRationalOverflow, message, field)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RationalNs {
    num: u64,
    den: u64,
}

impl RationalNs {
    pub const ZERO: RationalNs = RationalNs { num: 0, den: 1 };

    pub fn numerator(&self) -> u64 {
        self.num
    }

    pub fn denominator(&self) -> u64 {
        self.den
    }

    /// Build from any non-negative fraction, reducing it; overflow beyond U64 is an error.
    pub fn of(num: u128, den: u128, field: &str) -> Result<RationalNs> {
        if den == 0 {
            return Err(DetsimError::at(
                Reason::StructInvalidRational,
                format!("{field}: denominator must be positive"),
                field,
            ));
        }
        let g = if num == 0 { den } else { gcd(num, den) };
        let (n, d) = (num / g, den / g);
        if n > U64_MAX || d > U64_MAX {
            return Err(overflow(format!("{field}: {n}/{d} does not fit U64"), field));
        }
        Ok(RationalNs {
            num: n as u64,
            den: d as u64,
        })
    }

    /// Read the wire form; it must already be reduced, and zero must be 0/1.
    pub fn read(value: Option<&Value>, field: &str) -> Result<RationalNs> {
        let members = read_object(value, field)?;
        refuse_unknown_fields(members, &["numerator", "denominator"], field)?;
        let num = read_u64(member(members, "numerator"), &format!("{field}.numerator"))?;
        let den = read_u64(member(members, "denominator"), &format!("{field}.denominator"))?;
        if den == 0 {
            return Err(DetsimError::at(
                Reason::StructInvalidRational,
                format!("{field}: denominator is 0"),
                field,
            ));
        }
        if gcd(num as u128, den as u128) != 1 {
            return Err(DetsimError::at(
                Reason::StructInvalidRational,
                format!("{field}: {num}/{den} is not reduced (zero is 0/1)"),
                field,
            ));
        }
        Ok(RationalNs { num, den })
    }

    /// Read a duration: like read, but zero is refused.
    pub fn read_duration(value: Option<&Value>, field: &str) -> Result<RationalNs> {
        let r = RationalNs::read(value, field)?;
        if r.num == 0 {
            return Err(DetsimError::at(
                Reason::StructInvalidRational,
                format!("{field}: a duration must be non-zero"),
                field,
            ));
        }
        Ok(r)
    }

    pub fn to_json(&self) -> Value {
        Value::Object(vec![
            ("numerator".into(), Value::String(self.num.to_string())),
            ("denominator".into(), Value::String(self.den.to_string())),
        ])
    }

    pub fn is_zero(&self) -> bool {
        self.num == 0
    }

    /// Knuth's form (TAOCP 4.5.1): with reduced operands the cross terms share only gcd(b, d), so
    /// when the numerator overflows u128 the reduced result cannot fit U64 either — the same
    /// outcome as exact bigint arithmetic.
    pub fn add(&self, o: &RationalNs) -> Result<RationalNs> {
        let (a, b, c, d) = (self.num as u128, self.den as u128, o.num as u128, o.den as u128);
        let g = gcd(b, d);
        let t = (a * (d / g))
            .checked_add(c * (b / g))
            .ok_or_else(|| overflow(format!("sum: {self} + {o} does not fit U64"), "sum"))?;
        RationalNs::of(t, (b / g) * d, "sum")
    }

    pub fn sub(&self, o: &RationalNs) -> Result<RationalNs> {
        let (a, b, c, d) = (self.num as u128, self.den as u128, o.num as u128, o.den as u128);
        let g = gcd(b, d);
        let (l, r) = (a * (d / g), c * (b / g));
        if l < r {
            return Err(DetsimError::new(
                Reason::StructRationalOverflow,
                format!("difference {self} - {o} is below zero"),
            ));
        }
        RationalNs::of(l - r, (b / g) * d, "difference")
    }

    pub fn mul_int(&self, k: u64) -> Result<RationalNs> {
        RationalNs::of(self.num as u128 * k as u128, self.den as u128, "product")
    }

    /// floor(self / o); None when o is zero.
    pub fn floor_div(&self, o: &RationalNs) -> Option<u128> {
        let divisor = self.den as u128 * o.num as u128;
        (divisor != 0).then(|| (self.num as u128 * o.den as u128) / divisor)
    }
}

impl Ord for RationalNs {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.num as u128 * o.den as u128).cmp(&(o.num as u128 * self.den as u128))
    }
}

impl PartialOrd for RationalNs {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl std::fmt::Display for RationalNs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

// ---------------------------------------------------------------------------------------------
// Scope: the timeline identity of a request.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub session_id: String,
    pub epoch: String,
    pub step: u64,
}

impl Scope {
    pub fn read(value: Option<&Value>, field: &str) -> Result<Scope> {
        let members = read_object(value, field)?;
        refuse_unknown_fields(members, &["sessionId", "epoch", "step"], field)?;
        Ok(Scope {
            session_id: read_id(member(members, "sessionId"), &format!("{field}.sessionId"))?.to_string(),
            epoch: read_id(member(members, "epoch"), &format!("{field}.epoch"))?.to_string(),
            step: read_u64(member(members, "step"), &format!("{field}.step"))?,
        })
    }

    pub fn to_json(&self) -> Value {
        Value::Object(vec![
            ("sessionId".into(), Value::String(self.session_id.clone())),
            ("epoch".into(), Value::String(self.epoch.clone())),
            ("step".into(), Value::String(self.step.to_string())),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_strict;

    fn r(n: u64, d: u64) -> RationalNs {
        RationalNs::of(n as u128, d as u128, "t").unwrap()
    }

    #[test]
    fn ids_u64s_and_digests_are_refused_not_normalised() {
        for good in ["a", "0", "fly-a", "a.b_c-d", &"a".repeat(64)] {
            assert!(is_id(good), "{good}");
        }
        for bad in ["", "A", "-a", ".a", "_a", "a b", "é", &"a".repeat(65)] {
            assert!(!is_id(bad), "{bad}");
        }
        assert_eq!(parse_u64("18446744073709551615"), Some(u64::MAX));
        for bad in [
            "",
            "01",
            "-1",
            "+1",
            "1.0",
            "1e3",
            " 1",
            "18446744073709551616",
            "0x10",
            "99999999999999999999",
        ] {
            assert_eq!(parse_u64(bad), None, "{bad}");
        }
        assert!(is_digest(&"a".repeat(64)));
        assert!(!is_digest(&"A".repeat(64)) && !is_digest(&"a".repeat(63)));
        let e = read_u64(Some(&Value::Number(1.0)), "x.step").unwrap_err();
        assert_eq!(
            (e.reason, e.field.as_deref()),
            (Reason::StructInvalidU64, Some("x.step"))
        );
        assert_eq!(
            read_id(None, "agentId").unwrap_err().message,
            "agentId: nothing is not an Id (1-64 of a-z 0-9 . _ -, starting with a letter or digit)"
        );
        assert_eq!(read_request_id(Some(&"req-12".into()), "r").unwrap(), "req-12");
        assert!(read_request_id(Some(&"req-012".into()), "r").is_err());
        assert_eq!(read_i32(Some(&Value::Number(-2147483648.0)), "s").unwrap(), i32::MIN);
        assert!(read_i32(Some(&Value::Number(2147483648.0)), "s").is_err());
        assert!(read_i32(Some(&Value::Number(1.5)), "s").is_err());
    }

    #[test]
    fn rationals_read_reduced_only() {
        let v = parse_strict(br#"{"denominator":"3","numerator":"1000000"}"#).unwrap();
        assert_eq!(RationalNs::read(Some(&v), "w").unwrap(), r(1000000, 3));
        for (text, reason) in [
            (r#"{"denominator":"4","numerator":"2"}"#, Reason::StructInvalidRational),
            (r#"{"denominator":"0","numerator":"0"}"#, Reason::StructInvalidRational),
            (r#"{"denominator":"2","numerator":"0"}"#, Reason::StructInvalidRational),
            (
                r#"{"denominator":"1","numerator":"0","x":"1"}"#,
                Reason::StructUnknownField,
            ),
            (r#"{"denominator":1,"numerator":"0"}"#, Reason::StructInvalidU64),
        ] {
            let v = parse_strict(text.as_bytes()).unwrap();
            assert_eq!(RationalNs::read(Some(&v), "w").unwrap_err().reason, reason, "{text}");
        }
        let zero = parse_strict(br#"{"denominator":"1","numerator":"0"}"#).unwrap();
        assert!(RationalNs::read(Some(&zero), "w").unwrap().is_zero());
        assert_eq!(
            RationalNs::read_duration(Some(&zero), "w").unwrap_err().reason,
            Reason::StructInvalidRational
        );
    }

    #[test]
    fn rational_arithmetic_is_exact_and_overflow_is_an_error() {
        // 60 Hz frames against a 1 ms tick: 16, 17, 17 ticks, remainder 0 (docs/spec/lockstep.md).
        let frame = r(50_000_000, 3);
        let tick = r(1_000_000, 1);
        let mut acc = RationalNs::ZERO;
        let mut ticks = vec![];
        for _ in 0..3 {
            acc = acc.add(&frame).unwrap();
            let k = acc.floor_div(&tick).unwrap();
            ticks.push(k);
            acc = acc.sub(&tick.mul_int(k as u64).unwrap()).unwrap();
        }
        assert_eq!(ticks, vec![16, 17, 17]);
        assert!(acc.is_zero());
        let max = u64::MAX;
        // (2^64-3)/(2^64-2) + (2^64-1)/(2^64-2) = 2: fits, though the naive cross product a*d + c*b
        // (about 2^129) would overflow u128; bigint TypeScript gets 2 as well.
        assert_eq!(r(max - 2, max - 1).add(&r(max, max - 1)).unwrap(), r(2, 1));
        assert_eq!(
            r(max, 1).add(&r(1, 1)).unwrap_err().reason,
            Reason::StructRationalOverflow
        );
        assert_eq!(
            r(max, 2).add(&r(max, 3)).unwrap_err().reason,
            Reason::StructRationalOverflow
        );
        assert_eq!(
            r(1, 3).sub(&r(1, 2)).unwrap_err().reason,
            Reason::StructRationalOverflow
        );
        assert_eq!(r(max, 1).mul_int(2).unwrap_err().reason, Reason::StructRationalOverflow);
        assert_eq!(r(1, 2).floor_div(&RationalNs::ZERO), None);
        assert!(r(1, 3) < r(1, 2) && r(2, 4) == r(1, 2));
        assert_eq!(
            RationalNs::of(1, 0, "f").unwrap_err().reason,
            Reason::StructInvalidRational
        );
    }

    #[test]
    fn scope_reads_and_refuses_unknown_fields() {
        let v = parse_strict(br#"{"epoch":"epoch-1","sessionId":"demo","step":"42"}"#).unwrap();
        let s = Scope::read(Some(&v), "scope").unwrap();
        assert_eq!(
            (s.session_id.as_str(), s.epoch.as_str(), s.step),
            ("demo", "epoch-1", 42)
        );
        assert_eq!(
            crate::json::canonicalize(&s.to_json()).unwrap(),
            r#"{"epoch":"epoch-1","sessionId":"demo","step":"42"}"#
        );
        let bad = parse_strict(br#"{"epoch":"epoch-1","sessionId":"demo","step":"42","stepp":"1"}"#).unwrap();
        let e = Scope::read(Some(&bad), "scope").unwrap_err();
        assert_eq!(
            (e.reason, e.field.as_deref()),
            (Reason::StructUnknownField, Some("scope.stepp"))
        );
    }
}
