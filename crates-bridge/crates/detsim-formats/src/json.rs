// RFC 8785 (JCS) canonical JSON over detsim's own value type: a writer, a strict parser and
// SHA-256 digests, deciding exactly as core/formats/canonical-json.ts does (same checks,
// same order, same reason codes and messages). Not a general JSON library, and not serde_json,
// whose number printing and key order are not canonical.
use crate::error::{DetsimError, Reason, Result};
use sha2::{Digest as _, Sha256};
use std::cmp::Ordering;

/// A JSON value. Objects keep their members in parse (or construction) order; the writer sorts.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object, or None (also for non-objects).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Object(members) => Some(members),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// How the TypeScript readers show a value in an error message (`describe` in scalars.ts):
    /// strings longer than 80 UTF-16 units are cut to 77 plus "...", anything else is
    /// JSON.stringify'd (JavaScript property order: array-index keys first, ascending).
    pub fn describe(&self) -> String {
        match self {
            Value::String(s) => {
                let units: Vec<u16> = s.encode_utf16().collect();
                if units.len() > 80 {
                    let mut cut = units[..77].to_vec();
                    cut.extend("...".encode_utf16());
                    quote_utf16(&cut)
                } else {
                    quote_utf16(&units)
                }
            }
            other => js_stringify(other),
        }
    }
}

/// JSON.stringify of a UTF-16 string: lone surrogates are escaped (well-formed JSON.stringify).
fn quote_utf16(units: &[u16]) -> String {
    let mut out = String::from("\"");
    for r in char::decode_utf16(units.iter().copied()) {
        match r {
            Ok(c) => {
                let mut one = String::new();
                quote_string(&c.to_string(), &mut one);
                out.push_str(&one[1..one.len() - 1]);
            }
            Err(e) => out.push_str(&format!("\\u{:04x}", e.unpaired_surrogate())),
        }
    }
    out.push('"');
    out
}

/// A key JavaScript treats as an array index, which objects list first in ascending order.
fn array_index(key: &str) -> Option<u32> {
    let canonical = key == "0" || (!key.starts_with('0') && !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()));
    if !canonical || key.len() > 10 {
        return None;
    }
    key.parse::<u64>()
        .ok()
        .filter(|&n| n < u32::MAX as u64)
        .map(|n| n as u32)
}

/// JSON.stringify of a parsed value, in JavaScript property order (not canonical).
pub fn js_stringify(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => serialize_number(*n).unwrap_or_else(|_| "null".into()),
        Value::String(s) => {
            let mut out = String::new();
            quote_string(s, &mut out);
            out
        }
        Value::Array(items) => format!("[{}]", items.iter().map(js_stringify).collect::<Vec<_>>().join(",")),
        Value::Object(members) => {
            let mut indexed: Vec<(u32, &(String, Value))> = members
                .iter()
                .filter_map(|m| array_index(&m.0).map(|i| (i, m)))
                .collect();
            indexed.sort_by_key(|(i, _)| *i);
            let named = members.iter().filter(|m| array_index(&m.0).is_none());
            let parts: Vec<String> = indexed
                .into_iter()
                .map(|(_, m)| m)
                .chain(named)
                .map(|(k, v)| {
                    let mut key = String::new();
                    quote_string(k, &mut key);
                    format!("{key}:{}", js_stringify(v))
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

// ---------------------------------------------------------------------------------------------
// Writer

/// Deepest nesting the writer and the parser accept (the top-level value is depth 0).
const MAX_DEPTH: usize = 512;

/// ECMAScript Number::toString, which RFC 8785 adopts; -0 prints as 0. Non-finite is refused.
pub fn serialize_number(n: f64) -> Result<String> {
    if !n.is_finite() {
        let shown = if n.is_nan() {
            "NaN"
        } else if n > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        return Err(DetsimError::new(
            Reason::StructNonFiniteNumber,
            format!("cannot serialize {shown} as JSON"),
        ));
    }
    if n == 0.0 {
        return Ok("0".to_string()); // covers -0, which Number::toString prints as "0"
    }
    Ok(ryu_js::Buffer::new().format_finite(n).to_string())
}

/// A string quoted and escaped exactly as JSON.stringify does (RFC 8785's escaping).
pub fn quote_string(s: &str, out: &mut String) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// RFC 8785 member order: keys compared as sequences of UTF-16 code units.
pub fn compare_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write(value: &Value, path: &str, out: &mut String, depth: usize) -> Result<()> {
    // The parser's bound: a value the parser could not read back is not written either.
    if depth > MAX_DEPTH {
        let shown: String = path.chars().take(60).collect();
        return Err(DetsimError::at(
            Reason::StructInvalidJson,
            format!("nesting deeper than {MAX_DEPTH} (or a cycle) at {shown}..."),
            "$",
        ));
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if !n.is_finite() {
                let shown = if n.is_nan() {
                    "NaN"
                } else if *n > 0.0 {
                    "Infinity"
                } else {
                    "-Infinity"
                };
                return Err(DetsimError::at(
                    Reason::StructNonFiniteNumber,
                    format!("{shown} at {path} is not a finite number"),
                    path,
                ));
            }
            out.push_str(&serialize_number(*n)?);
        }
        Value::String(s) => quote_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, &format!("{path}[{i}]"), out, depth + 1)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<&(String, Value)> = members.iter().collect();
            sorted.sort_by(|a, b| compare_utf16(&a.0, &b.0));
            // A JavaScript object cannot repeat a key; a Vec can, so refuse it rather than pick one.
            if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
                let mut key = String::new();
                quote_string(&w[0].0, &mut key);
                return Err(DetsimError::at(
                    Reason::StructDuplicateKey,
                    format!("duplicate key {key} at {path}"),
                    path,
                ));
            }
            out.push('{');
            for (i, (key, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                quote_string(key, out);
                out.push(':');
                write(v, &format!("{path}.{key}"), out, depth + 1)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// The RFC 8785 canonical text of a value.
pub fn canonicalize(value: &Value) -> Result<String> {
    let mut out = String::new();
    write(value, "$", &mut out, 0)?;
    Ok(out)
}

/// The canonical UTF-8 bytes of a value.
pub fn canonical_bytes(value: &Value) -> Result<Vec<u8>> {
    canonicalize(value).map(String::into_bytes)
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&sha256(bytes))
}

/// Lowercase hex SHA-256 of the canonical bytes: the `Digest` of a JSON value.
pub fn canonical_digest(value: &Value) -> Result<String> {
    Ok(sha256_hex(&canonical_bytes(value)?))
}

// ---------------------------------------------------------------------------------------------
// Strict parser
const MAX_SAFE_INTEGER: f64 = 9007199254740991.0;

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    /// Errors name the offset in UTF-16 code units, as the TypeScript parser's do.
    fn fail_with<T>(&self, reason: Reason, message: impl AsRef<str>) -> Result<T> {
        let offset = match self.text.get(..self.pos) {
            Some(prefix) => prefix.encode_utf16().count(),
            None => self.pos,
        };
        Err(DetsimError::new(
            reason,
            format!("{} at offset {offset}", message.as_ref()),
        ))
    }

    fn fail<T>(&self, message: impl AsRef<str>) -> Result<T> {
        self.fail_with(Reason::StructInvalidJson, message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn starts_with(&self, word: &str) -> bool {
        self.bytes[self.pos.min(self.bytes.len())..].starts_with(word.as_bytes())
    }

    fn parse_document(&mut self) -> Result<Value> {
        self.skip_whitespace();
        let value = self.parse_value(0)?;
        self.skip_whitespace();
        if self.pos != self.bytes.len() {
            return self.fail("trailing data after the JSON value");
        }
        Ok(value)
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn parse_value(&mut self, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return self.fail(format!("nesting deeper than {MAX_DEPTH}"));
        }
        match self.peek() {
            Some(b'{') => return self.parse_object(depth),
            Some(b'[') => return self.parse_array(depth),
            Some(b'"') => return self.parse_string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => return self.parse_number().map(Value::Number),
            _ => {}
        }
        for (word, value) in [
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("null", Value::Null),
        ] {
            if self.starts_with(word) {
                self.pos += word.len();
                return Ok(value);
            }
        }
        if self.pos >= self.bytes.len() {
            return self.fail("unexpected end of input");
        }
        let ch = self.text[self.pos..].chars().next().unwrap_or('\u{fffd}');
        self.fail(format!("unexpected character {}", describe_code_unit(ch)))
    }

    fn expect(&mut self, ch: u8) -> Result<()> {
        if self.peek() != Some(ch) {
            if self.pos >= self.bytes.len() {
                return self.fail(format!("unexpected end of input, expected '{}'", ch as char));
            }
            return self.fail(format!("expected '{}'", ch as char));
        }
        self.pos += 1;
        Ok(())
    }

    fn parse_object(&mut self, depth: usize) -> Result<Value> {
        self.pos += 1;
        let mut members: Vec<(String, Value)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return self.fail("expected a string key");
            }
            let key_start = self.pos;
            let key = self.parse_string()?;
            if seen.contains(&key) {
                self.pos = key_start;
                let mut shown = String::new();
                quote_string(&key, &mut shown);
                return self.fail_with(Reason::StructDuplicateKey, format!("duplicate key {shown}"));
            }
            seen.insert(key.clone());
            self.skip_whitespace();
            self.expect(b':')?;
            self.skip_whitespace();
            let value = self.parse_value(depth + 1)?;
            members.push((key, value));
            self.skip_whitespace();
            if self.peek() == Some(b',') {
                self.pos += 1;
                continue;
            }
            self.expect(b'}')?;
            return Ok(Value::Object(members));
        }
    }

    fn parse_array(&mut self, depth: usize) -> Result<Value> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.parse_value(depth + 1)?);
            self.skip_whitespace();
            if self.peek() == Some(b',') {
                self.pos += 1;
                continue;
            }
            self.expect(b']')?;
            return Ok(Value::Array(items));
        }
    }

    /// Strings are collected as UTF-16 code units (escapes may pair into surrogates) and checked
    /// for lone surrogates after the closing quote, exactly where the TypeScript parser checks.
    fn parse_string(&mut self) -> Result<String> {
        self.pos += 1; // opening quote
        let mut units: Vec<u16> = Vec::new();
        let mut run_start = self.pos;
        loop {
            let Some(c) = self.peek() else {
                return self.fail("unterminated string");
            };
            if c == b'"' {
                units.extend(self.text[run_start..self.pos].encode_utf16());
                self.pos += 1;
                break;
            }
            if c < 0x20 {
                return self.fail("raw control character in a string");
            }
            if c == b'\\' {
                units.extend(self.text[run_start..self.pos].encode_utf16());
                units.push(self.parse_escape()?);
                run_start = self.pos;
                continue;
            }
            self.pos += 1;
        }
        match String::from_utf16(&units) {
            Ok(s) => Ok(s),
            Err(_) => self.fail("lone surrogate in a string"),
        }
    }

    fn parse_escape(&mut self) -> Result<u16> {
        let e = self.bytes.get(self.pos + 1).copied();
        self.pos += 2;
        let unit = match e {
            Some(b'"') => b'"' as u16,
            Some(b'\\') => b'\\' as u16,
            Some(b'/') => b'/' as u16,
            Some(b'b') => 0x08,
            Some(b'f') => 0x0c,
            Some(b'n') => 0x0a,
            Some(b'r') => 0x0d,
            Some(b't') => 0x09,
            Some(b'u') => {
                let hex = self
                    .bytes
                    .get(self.pos..self.pos + 4)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                let Some(hex) = hex else {
                    return self.fail("bad \\u escape");
                };
                self.pos += 4;
                u16::from_str_radix(std::str::from_utf8(hex).unwrap_or("0"), 16).unwrap_or(0)
            }
            _ => {
                self.pos -= 2;
                return self.fail("bad escape");
            }
        };
        Ok(unit)
    }

    fn digit_at(&self, pos: usize) -> bool {
        matches!(self.bytes.get(pos), Some(b'0'..=b'9'))
    }

    fn parse_number(&mut self) -> Result<f64> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while self.digit_at(self.pos) {
                    self.pos += 1;
                }
            }
            _ => return self.fail("bad number"),
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            integral = false;
            self.pos += 1;
            if !self.digit_at(self.pos) {
                return self.fail("bad number: digits must follow the point");
            }
            while self.digit_at(self.pos) {
                self.pos += 1;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            integral = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !self.digit_at(self.pos) {
                return self.fail("bad number: digits must follow the exponent");
            }
            while self.digit_at(self.pos) {
                self.pos += 1;
            }
        }
        let literal = &self.text[start..self.pos];
        // Rust's parse is correctly rounded, like ECMAScript's Number(literal).
        let n: f64 = literal.parse().unwrap_or(f64::NAN);
        if !n.is_finite() {
            self.pos = start;
            return self.fail(format!("number {literal} is out of range"));
        }
        if integral && n.abs() > MAX_SAFE_INTEGER {
            self.pos = start;
            return self.fail_with(
                Reason::StructUnsafeInteger,
                format!("integer {literal} is beyond ±(2^53−1); write counters as U64 strings"),
            );
        }
        Ok(n)
    }
}

/// JSON.stringify of the UTF-16 code unit at a position (the first unit of an astral character).
fn describe_code_unit(ch: char) -> String {
    let mut buf = [0u16; 2];
    let first = ch.encode_utf16(&mut buf)[0];
    match char::from_u32(first as u32) {
        Some(c) => {
            let mut s = String::new();
            quote_string(&c.to_string(), &mut s);
            s
        }
        None => format!("\"\\u{first:04x}\""),
    }
}

/// Decode UTF-8 strictly: invalid bytes and a byte-order mark are refused.
pub fn decode_utf8_strict(bytes: &[u8]) -> Result<&str> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| DetsimError::new(Reason::StructInvalidUtf8, "input is not valid UTF-8"))?;
    if text.starts_with('\u{feff}') {
        return Err(DetsimError::new(
            Reason::StructInvalidJson,
            "a byte-order mark is not allowed in JSON text",
        ));
    }
    Ok(text)
}

/// Parse JSON text strictly.
pub fn parse_strict_str(text: &str) -> Result<Value> {
    Parser::new(text).parse_document()
}

/// Parse JSON strictly from UTF-8 bytes.
pub fn parse_strict(bytes: &[u8]) -> Result<Value> {
    parse_strict_str(decode_utf8_strict(bytes)?)
}

/// Parse, and require the bytes to be already canonical (re-serialising gives the same bytes).
pub fn parse_canonical(bytes: &[u8]) -> Result<Value> {
    let value = parse_strict(bytes)?;
    if canonical_bytes(&value)? != bytes {
        return Err(DetsimError::new(
            Reason::StructNotCanonical,
            "JSON is not in RFC 8785 canonical form",
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str) -> Reason {
        parse_strict(text.as_bytes()).unwrap_err().reason
    }

    fn canon(text: &str) -> String {
        canonicalize(&parse_strict(text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn sorts_keys_by_utf16_code_units_not_by_utf8_bytes() {
        // U+1F602 is the surrogate pair D83D DE02, which sorts before U+FB33 in UTF-16 but after it in UTF-8.
        assert_eq!(
            canon("{\"\u{fb33}\":1,\"\u{1f602}\":2}"),
            "{\"\u{1f602}\":2,\"\u{fb33}\":1}"
        );
        assert_eq!(
            canon(r#"{"b":1,"a":{"d":[],"c":null}}"#),
            r#"{"a":{"c":null,"d":[]},"b":1}"#
        );
    }

    #[test]
    fn escapes_strings_like_json_stringify() {
        assert_eq!(
            canon(r#""\u000F\u000a\/\"\\\b\f\r\t\u007f\u0080\u2028""#),
            "\"\\u000f\\n/\\\"\\\\\\b\\f\\r\\t\u{7f}\u{80}\u{2028}\""
        );
        assert_eq!(canon(r#""\ud83d\ude02""#), "\"\u{1f602}\"");
    }

    #[test]
    fn prints_numbers_as_ecmascript_does() {
        for (text, want) in [
            ("1E30", "1e+30"),
            ("4.50", "4.5"),
            ("2e-3", "0.002"),
            ("-0", "0"),
            ("56.0", "56"),
            ("1e21", "1e+21"),
            ("123456789012345680000", "123456789012345680000"),
        ] {
            let got = match text {
                "123456789012345680000" => serialize_number(123456789012345680000.0).unwrap(),
                _ => canon(text),
            };
            assert_eq!(got, want, "{text}");
        }
        assert_eq!(
            serialize_number(f64::NAN).unwrap_err().reason,
            Reason::StructNonFiniteNumber
        );
        assert_eq!(
            canonicalize(&Value::Array(vec![Value::Number(f64::INFINITY)]))
                .unwrap_err()
                .reason,
            Reason::StructNonFiniteNumber
        );
    }

    #[test]
    fn refuses_what_the_typescript_parser_refuses_with_the_same_reason() {
        assert_eq!(reason(r#"{"a":1,"a":2}"#), Reason::StructDuplicateKey);
        assert_eq!(reason(r#"[{"x":{"a":1,"a":2}}]"#), Reason::StructDuplicateKey);
        assert_eq!(reason("9007199254740992"), Reason::StructUnsafeInteger);
        assert_eq!(reason("-9007199254740992"), Reason::StructUnsafeInteger);
        assert_eq!(
            parse_strict(b"9007199254740991").unwrap(),
            Value::Number(9007199254740991.0)
        );
        assert_eq!(parse_strict(b"1E30").unwrap(), Value::Number(1e30));
        assert_eq!(reason("1e400"), Reason::StructInvalidJson);
        for bad in [
            "NaN",
            "Infinity",
            "-Infinity",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            "1e",
            "\"\t\"",
            r#""\ud800""#,
            r#""\udc00x""#,
            r#""\x""#,
            r#""\u12g4""#,
            "[1] x",
            "",
            "  ",
            "{",
            "\"abc",
            "tru",
            "+1",
            ".5",
            "\u{feff}1",
        ] {
            assert_eq!(reason(bad), Reason::StructInvalidJson, "{bad:?}");
        }
        assert_eq!(
            parse_strict(&[0x22, 0xff, 0x22]).unwrap_err().reason,
            Reason::StructInvalidUtf8
        );
        assert_eq!(
            parse_strict(&[0x22, 0xed, 0xa0, 0x80, 0x22]).unwrap_err().reason,
            Reason::StructInvalidUtf8
        );
    }

    #[test]
    fn messages_match_the_typescript_parser() {
        let msg = |t: &str| parse_strict(t.as_bytes()).unwrap_err().message;
        assert_eq!(msg(r#"{"a":1,"a":2}"#), "duplicate key \"a\" at offset 7");
        assert_eq!(msg("[1] x"), "trailing data after the JSON value at offset 4");
        assert_eq!(msg("\"é\u{1}\""), "raw control character in a string at offset 2");
        assert_eq!(
            msg("[12345678901234567890]"),
            "integer 12345678901234567890 is beyond ±(2^53−1); write counters as U64 strings at offset 1"
        );
        assert_eq!(msg("[x]"), "unexpected character \"x\" at offset 1");
        assert_eq!(msg(r#""\ud800""#), "lone surrogate in a string at offset 8");
    }

    #[test]
    fn nesting_limit_matches_the_typescript_parser() {
        let ok = "[".repeat(513) + &"]".repeat(513);
        assert!(parse_strict(ok.as_bytes()).is_ok());
        let deep = "[".repeat(514) + &"]".repeat(514);
        assert!(
            parse_strict(deep.as_bytes())
                .unwrap_err()
                .message
                .starts_with("nesting deeper than 512")
        );
    }

    #[test]
    fn parse_canonical_requires_canonical_bytes() {
        assert!(parse_canonical(br#"{"a":1,"b":[true,null]}"#).is_ok());
        assert_eq!(
            parse_canonical(br#"{"b":1,"a":2}"#).unwrap_err().reason,
            Reason::StructNotCanonical
        );
        assert_eq!(
            parse_canonical(b"[1.0]").unwrap_err().reason,
            Reason::StructNotCanonical
        );
        assert_eq!(parse_canonical(b" 1").unwrap_err().reason, Reason::StructNotCanonical);
    }

    #[test]
    fn writer_refuses_a_repeated_key_in_a_constructed_object() {
        let v = Value::Object(vec![("a".into(), Value::Null), ("a".into(), Value::Bool(true))]);
        assert_eq!(canonicalize(&v).unwrap_err().reason, Reason::StructDuplicateKey);
    }
}
