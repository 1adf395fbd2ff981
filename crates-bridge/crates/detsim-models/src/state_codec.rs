// Capture payload bytes exactly as workers/state-codec.ts writes them (msgpackr with records off
// and variable map sizes, objects re-keyed in sorted order): the msgpack subset plain state uses,
// lossless (docs/spec/state-codec.md): int64/uint64 stay integers, a wider integer is msgpackr's
// big-integer ext (0x42) kept as its bytes, -0 is a float64, an n-dimensional array is the ndarray
// ext (0x6e) kept as dtype, shape and bytes. Not a general msgpack library: no other extensions,
// no timestamps, no records.
use detsim_formats::{DetsimError, Reason};

/// Plain state data: what a model's capture returns.
#[derive(Debug, Clone, PartialEq)]
pub enum StateValue {
    Nil,
    Bool(bool),
    Number(f64),
    /// A msgpack int64 (what a TypeScript BigInt or a wide Python int in that range is written as).
    Int(i64),
    /// A msgpack uint64 above i64::MAX.
    Uint(u64),
    /// An integer beyond 64 bits: msgpackr's big-integer ext data (two's complement, big-endian,
    /// a whole number of 64-bit chunks).
    BigInt(Vec<u8>),
    /// An n-dimensional array: numpy typestr (e.g. "<f8"), shape, little-endian C-order bytes.
    NdArray {
        dtype: String,
        shape: Vec<u32>,
        data: Vec<u8>,
    },
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<StateValue>),
    /// An object; the encoder sorts its keys by UTF-16 code units, as Object.keys(...).sort() does.
    Map(Vec<(String, StateValue)>),
}

fn codec_error(message: impl Into<String>) -> DetsimError {
    DetsimError::new(Reason::StructInvalidField, message)
}

const BIGINT_EXT: u8 = 0x42;
const NDARRAY_EXT: u8 = 0x6e;

/// A msgpack ext: fixext for 1/2/4/8/16 bytes, else ext8/16/32 (as msgpackr writes them).
fn write_ext(ext_type: u8, data: &[u8], out: &mut Vec<u8>) {
    match data.len() {
        1 => out.push(0xd4),
        2 => out.push(0xd5),
        4 => out.push(0xd6),
        8 => out.push(0xd7),
        16 => out.push(0xd8),
        n if n < 0x100 => out.extend([0xc7, n as u8]),
        n if n < 0x10000 => {
            out.push(0xc8);
            out.extend((n as u16).to_be_bytes());
        }
        n => {
            out.push(0xc9);
            out.extend((n as u32).to_be_bytes());
        }
    }
    out.push(ext_type);
    out.extend(data);
}

fn ndarray_data(dtype: &str, shape: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = vec![dtype.len() as u8];
    out.extend(dtype.as_bytes());
    out.push(shape.len() as u8);
    for d in shape {
        out.extend(d.to_be_bytes());
    }
    out.extend(data);
    out
}

fn write_number(n: f64, out: &mut Vec<u8>) {
    // msgpackr: integers that fit u32 / i32 use the smallest int form; -0 and everything else is a
    // float64 (-0 as float64 -0: lossless, as the TypeScript and Python codecs write it).
    if n == 0.0 && n.is_sign_negative() {
        out.push(0xcb);
        out.extend(n.to_be_bytes());
    } else if n.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&n) {
        let v = n as u32;
        match v {
            0..=0x7f => out.push(v as u8),
            0x80..=0xff => out.extend([0xcc, v as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend((v as u16).to_be_bytes());
            }
            _ => {
                out.push(0xce);
                out.extend(v.to_be_bytes());
            }
        }
    } else if n.fract() == 0.0 && (i32::MIN as f64..0.0).contains(&n) {
        let v = n as i32;
        match v {
            -0x20..=-1 => out.push(v as u8),
            -0x80..=-0x21 => out.extend([0xd0, v as u8]),
            -0x8000..=-0x81 => {
                out.push(0xd1);
                out.extend((v as i16).to_be_bytes());
            }
            _ => {
                out.push(0xd2);
                out.extend(v.to_be_bytes());
            }
        }
    } else {
        out.push(0xcb);
        out.extend(n.to_be_bytes());
    }
}

fn write_len(len: usize, fix: u8, fix_max: usize, forms: [(u8, usize); 3], out: &mut Vec<u8>) {
    if len < fix_max {
        out.push(fix | len as u8);
        return;
    }
    for (tag, bytes) in forms {
        if tag == 0 {
            continue;
        }
        if bytes == 1 && len < 0x100 {
            out.extend([tag, len as u8]);
            return;
        }
        if bytes == 2 && len < 0x10000 {
            out.push(tag);
            out.extend((len as u16).to_be_bytes());
            return;
        }
        if bytes == 4 {
            out.push(tag);
            out.extend((len as u32).to_be_bytes());
            return;
        }
    }
}

fn write(value: &StateValue, path: &str, out: &mut Vec<u8>) -> Result<(), DetsimError> {
    match value {
        StateValue::Nil => out.push(0xc0),
        StateValue::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        StateValue::Number(n) => {
            if !n.is_finite() {
                // Shown as JavaScript shows it, as workers/state-codec.ts does.
                let shown = if n.is_nan() {
                    "NaN"
                } else if *n > 0.0 {
                    "Infinity"
                } else {
                    "-Infinity"
                };
                return Err(codec_error(format!("state {path}: {shown} is not a finite number")));
            }
            write_number(*n, out);
        }
        StateValue::Int(v) => {
            out.push(0xd3);
            out.extend(v.to_be_bytes());
        }
        StateValue::Uint(v) => {
            out.push(0xcf);
            out.extend(v.to_be_bytes());
        }
        StateValue::BigInt(bytes) => write_ext(BIGINT_EXT, bytes, out),
        StateValue::NdArray { dtype, shape, data } => write_ext(NDARRAY_EXT, &ndarray_data(dtype, shape, data), out),
        StateValue::Str(s) => {
            write_len(s.len(), 0xa0, 0x20, [(0xd9, 1), (0xda, 2), (0xdb, 4)], out);
            out.extend(s.as_bytes());
        }
        StateValue::Bin(b) => {
            write_len(b.len(), 0, 0, [(0xc4, 1), (0xc5, 2), (0xc6, 4)], out);
            out.extend(b);
        }
        StateValue::Array(items) => {
            write_len(items.len(), 0x90, 0x10, [(0, 0), (0xdc, 2), (0xdd, 4)], out);
            for (i, item) in items.iter().enumerate() {
                write(item, &format!("{path}[{i}]"), out)?;
            }
        }
        StateValue::Map(members) => {
            let mut sorted: Vec<&(String, StateValue)> = members.iter().collect();
            sorted.sort_by(|a, b| detsim_formats::json::compare_utf16(&a.0, &b.0));
            if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(codec_error(format!("state {path}: a key repeats")));
            }
            write_len(sorted.len(), 0x80, 0x10, [(0, 0), (0xde, 2), (0xdf, 4)], out);
            for (key, v) in sorted {
                write(&StateValue::Str(key.clone()), path, out)?;
                write(v, &format!("{path}.{key}"), out)?;
            }
        }
    }
    Ok(())
}

/// Encode plain state to the bytes workers/state-codec.ts `encodeState` writes.
pub fn encode_state(value: &StateValue) -> Result<Vec<u8>, DetsimError> {
    let mut out = Vec::new();
    write(value, "$", &mut out)?;
    Ok(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DetsimError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| codec_error("state payload is truncated"))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<usize, DetsimError> {
        Ok(self.take(n)?.iter().fold(0usize, |acc, &b| (acc << 8) | b as usize))
    }

    fn value(&mut self, depth: usize) -> Result<StateValue, DetsimError> {
        if depth > 512 {
            return Err(codec_error("state payload nests deeper than 512"));
        }
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => StateValue::Number(tag as f64),
            0xe0..=0xff => StateValue::Number((tag as i8) as f64),
            0xc0 => StateValue::Nil,
            0xc2 => StateValue::Bool(false),
            0xc3 => StateValue::Bool(true),
            0xcc => StateValue::Number(self.uint(1)? as f64),
            0xcd => StateValue::Number(self.uint(2)? as f64),
            0xce => StateValue::Number(self.uint(4)? as f64),
            0xcf => StateValue::Uint(u64::from_be_bytes(self.take(8)?.try_into().unwrap())),
            0xd0 => StateValue::Number(self.take(1)?[0] as i8 as f64),
            0xd1 => StateValue::Number(i16::from_be_bytes(self.take(2)?.try_into().unwrap()) as f64),
            0xd2 => StateValue::Number(i32::from_be_bytes(self.take(4)?.try_into().unwrap()) as f64),
            0xd3 => StateValue::Int(i64::from_be_bytes(self.take(8)?.try_into().unwrap())),
            0xd4 => self.ext(1)?,
            0xd5 => self.ext(2)?,
            0xd6 => self.ext(4)?,
            0xd7 => self.ext(8)?,
            0xd8 => self.ext(16)?,
            0xc7 => {
                let n = self.uint(1)?;
                self.ext(n)?
            }
            0xc8 => {
                let n = self.uint(2)?;
                self.ext(n)?
            }
            0xc9 => {
                let n = self.uint(4)?;
                self.ext(n)?
            }
            0xca => StateValue::Number(f32::from_be_bytes(self.take(4)?.try_into().unwrap()) as f64),
            0xcb => StateValue::Number(f64::from_be_bytes(self.take(8)?.try_into().unwrap())),
            0xa0..=0xbf => self.string((tag & 0x1f) as usize)?,
            0xd9 => {
                let n = self.uint(1)?;
                self.string(n)?
            }
            0xda => {
                let n = self.uint(2)?;
                self.string(n)?
            }
            0xdb => {
                let n = self.uint(4)?;
                self.string(n)?
            }
            0xc4 => {
                let n = self.uint(1)?;
                StateValue::Bin(self.take(n)?.to_vec())
            }
            0xc5 => {
                let n = self.uint(2)?;
                StateValue::Bin(self.take(n)?.to_vec())
            }
            0xc6 => {
                let n = self.uint(4)?;
                StateValue::Bin(self.take(n)?.to_vec())
            }
            0x90..=0x9f => self.array((tag & 0x0f) as usize, depth)?,
            0xdc => {
                let n = self.uint(2)?;
                self.array(n, depth)?
            }
            0xdd => {
                let n = self.uint(4)?;
                self.array(n, depth)?
            }
            0x80..=0x8f => self.map((tag & 0x0f) as usize, depth)?,
            0xde => {
                let n = self.uint(2)?;
                self.map(n, depth)?
            }
            0xdf => {
                let n = self.uint(4)?;
                self.map(n, depth)?
            }
            other => {
                return Err(codec_error(format!(
                    "state payload: msgpack type 0x{other:02x} is not plain state"
                )));
            }
        })
    }

    fn ext(&mut self, n: usize) -> Result<StateValue, DetsimError> {
        let ext_type = self.take(1)?[0];
        let data = self.take(n)?;
        match ext_type {
            BIGINT_EXT if n > 0 => Ok(StateValue::BigInt(data.to_vec())),
            NDARRAY_EXT => read_ndarray(data),
            other => Err(codec_error(format!(
                "state payload: unsupported msgpack ext type {other}"
            ))),
        }
    }

    fn string(&mut self, n: usize) -> Result<StateValue, DetsimError> {
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec())
            .map(StateValue::Str)
            .map_err(|_| codec_error("state payload: a string is not UTF-8"))
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<StateValue, DetsimError> {
        let mut items = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(StateValue::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<StateValue, DetsimError> {
        let mut members = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let StateValue::Str(key) = self.value(depth + 1)? else {
                return Err(codec_error("state payload: a map key is not a string"));
            };
            members.push((key, self.value(depth + 1)?));
        }
        Ok(StateValue::Map(members))
    }
}

/// Decode payload bytes back to plain state; trailing bytes are refused.
const NDARRAY_DTYPES: [(&str, usize); 11] = [
    ("<f8", 8),
    ("<f4", 4),
    ("<i8", 8),
    ("<i4", 4),
    ("<i2", 2),
    ("|i1", 1),
    ("<u8", 8),
    ("<u4", 4),
    ("<u2", 2),
    ("|u1", 1),
    ("|b1", 1),
];

fn read_ndarray(data: &[u8]) -> Result<StateValue, DetsimError> {
    let bad = |why: &str| codec_error(format!("state payload: an ndarray ext {why}"));
    let len = *data.first().ok_or_else(|| bad("is empty"))? as usize;
    let dtype = data.get(1..1 + len).ok_or_else(|| bad("is truncated"))?;
    let dtype = std::str::from_utf8(dtype)
        .map_err(|_| bad("has an unknown dtype"))?
        .to_string();
    let size = NDARRAY_DTYPES
        .iter()
        .find(|(t, _)| *t == dtype)
        .ok_or_else(|| bad("has an unknown dtype"))?
        .1;
    let ndim = *data.get(1 + len).ok_or_else(|| bad("is truncated"))? as usize;
    let at = 2 + len + 4 * ndim;
    let dims = data.get(2 + len..at).ok_or_else(|| bad("is truncated"))?;
    let shape: Vec<u32> = dims
        .chunks(4)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
        .collect();
    let count = shape.iter().try_fold(size as u64, |n, &d| n.checked_mul(d as u64));
    if count != Some((data.len() - at) as u64) {
        return Err(bad("does not hold its shape"));
    }
    Ok(StateValue::NdArray {
        dtype,
        shape,
        data: data[at..].to_vec(),
    })
}

pub fn decode_state(bytes: &[u8]) -> Result<StateValue, DetsimError> {
    let mut r = Reader { bytes, pos: 0 };
    let v = r.value(0)?;
    if r.pos != bytes.len() {
        return Err(codec_error("state payload has trailing bytes"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(x: f64) -> Vec<u8> {
        encode_state(&StateValue::Number(x)).unwrap()
    }

    #[test]
    fn numbers_use_msgpackr_forms() {
        assert_eq!(n(0.0), [0x00]);
        // -0 is a float64 -0 (lossless; the TypeScript and Python codecs write it so too).
        assert_eq!(n(-0.0), [0xcb, 0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(n(127.0), [0x7f]);
        assert_eq!(n(128.0), [0xcc, 0x80]);
        assert_eq!(n(65536.0), [0xce, 0, 1, 0, 0]);
        assert_eq!(n(-1.0), [0xff]);
        assert_eq!(n(-33.0), [0xd0, 0xdf]);
        assert_eq!(n(-2147483648.0), [0xd2, 0x80, 0, 0, 0]);
        assert_eq!(n(4294967296.0), [0xcb, 0x41, 0xf0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(n(0.5), [0xcb, 0x3f, 0xe0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn wide_integers_and_arrays_round_trip_byte_for_byte() {
        for bytes in [
            vec![0xd3, 0, 0, 1, 0, 0, 0, 0, 0],
            vec![0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            [vec![0xd8, 0x42, 0, 0, 0, 0x10], vec![0; 12]].concat(),
            vec![0xc7, 0x0b, 0x6e, 3, b'|', b'b', b'1', 1, 0, 0, 0, 2, 1, 0],
        ] {
            assert_eq!(encode_state(&decode_state(&bytes).unwrap()).unwrap(), bytes);
        }
        assert_eq!(
            decode_state(&[0xd3, 0, 0, 0, 0, 0, 0, 0, 5]).unwrap(),
            StateValue::Int(5)
        );
        let short = [0xc7, 0x0a, 0x6e, 3, b'|', b'b', b'1', 1, 0, 0, 0, 2, 1];
        assert!(decode_state(&short[..]).is_err());
    }

    #[test]
    fn maps_are_sorted_and_round_trip() {
        let v = StateValue::Map(vec![
            ("rng".into(), StateValue::Number(-5.0)),
            ("rewardTotal".into(), StateValue::Number(1.5)),
        ]);
        let bytes = encode_state(&v).unwrap();
        assert_eq!(
            &bytes[..13],
            &[
                0x82, 0xab, b'r', b'e', b'w', b'a', b'r', b'd', b'T', b'o', b't', b'a', b'l'
            ]
        );
        let StateValue::Map(back) = decode_state(&bytes).unwrap() else {
            panic!("a map")
        };
        assert_eq!(back[0].0, "rewardTotal");
        assert_eq!(back[1], ("rng".to_string(), StateValue::Number(-5.0)));
        assert!(decode_state(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_state(&[bytes.as_slice(), &[0]].concat()).is_err());
    }
}
