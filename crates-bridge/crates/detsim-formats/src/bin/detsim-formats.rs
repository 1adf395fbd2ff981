// detsim-formats: the Rust formats on the command line, for cross-language tests and for people.
// Reads stdin, writes stdout; a refusal is one line `detsim-formats: [reason] message` on stderr.
// Not the detsim CLI: no runs, no files, no network.
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use detsim_formats::json::{Value, canonicalize, parse_strict};
use detsim_formats::{DetsimError, Reason, Xorshift32, check_of, decode_envelope, derive_seeds, encode_envelope};
use std::io::{Read, Write};
use std::process::ExitCode;

const USAGE: &str = "usage: detsim-formats <command> < input
commands (input on stdin, output on stdout):
  canonicalize     JSON text → its RFC 8785 canonical bytes (strict parse first)
  seed             {\"masterSeed\": U64, \"agentIds\": [Id]} → seed-derivation-v1 result (canonical JSON)
  xorshift         {\"seed\": i32, \"count\": n} → {\"state\": i32, \"values\": [u32]}
  encode-envelope  {\"manifest\": {...}, \"payloads\": [{\"name\": Id, \"base64\": ...}]} → FLYSESS1 bytes
  decode-envelope  FLYSESS1 bytes → {\"envelopeDigest\", \"manifest\", \"payloads\": [{\"name\", \"base64\"}]}
  batch            [{\"op\": command, ...input as JSON}] → [{\"ok\": output} | {\"error\": {...}}]
                   (canonicalize and decode-envelope take {\"base64\": bytes}; byte outputs are base64)
exit: 0 done; 1 an envelope failed verification; 2 a usage or input error";

/// What a command produced: bytes to write, or a JSON value to write canonically.
enum Output {
    Bytes(Vec<u8>),
    Json(Value),
}

fn obj(members: Vec<(&str, Value)>) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn input_error(message: impl Into<String>, field: &str) -> DetsimError {
    DetsimError::at(Reason::StructInvalidField, message, field)
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, DetsimError> {
    v.get(key)
        .ok_or_else(|| DetsimError::at(Reason::StructMissingField, format!("{key} is missing"), key))
}

fn base64_bytes(v: &Value, name: &str) -> Result<Vec<u8>, DetsimError> {
    let text = v
        .as_str()
        .ok_or_else(|| input_error(format!("{name} is not a base64 string"), name))?;
    B64.decode(text)
        .map_err(|e| input_error(format!("{name} is not base64: {e}"), name))
}

fn canonicalize_cmd(bytes: &[u8]) -> Result<Output, DetsimError> {
    Ok(Output::Bytes(canonicalize(&parse_strict(bytes)?)?.into_bytes()))
}

fn seed_cmd(input: &Value) -> Result<Output, DetsimError> {
    // A value of the wrong type is refused by the same reader, in the same order, as in TypeScript.
    let master_value = input.get("masterSeed");
    let master = match master_value {
        Some(Value::String(s)) => s.as_str(),
        other => return Err(detsim_formats::scalars::u64_error(other, "masterSeed")),
    };
    let ids = field(input, "agentIds")?
        .as_array()
        .ok_or_else(|| input_error("agentIds is not an array", "agentIds"))?;
    if !detsim_formats::scalars::is_u64(master) {
        return Err(detsim_formats::scalars::u64_error(master_value, "masterSeed"));
    }
    // derive_seeds checks each id, then repeats, in order; a non-string id is refused at its place
    // in that order too: only after the ids before it passed both checks (as deriveSeeds does).
    let mut strs: Vec<&str> = Vec::with_capacity(ids.len());
    for (i, v) in ids.iter().enumerate() {
        match v {
            Value::String(s) => strs.push(s.as_str()),
            other => {
                derive_seeds(master, &strs)?;
                detsim_formats::scalars::read_id(Some(other), &format!("agentIds[{i}]"))?;
                unreachable!("read_id accepts strings only");
            }
        }
    }
    Ok(Output::Json(derive_seeds(master, &strs)?.to_json()))
}

fn xorshift_cmd(input: &Value) -> Result<Output, DetsimError> {
    let seed = detsim_formats::scalars::read_i32(input.get("seed"), "seed")?;
    let count = match input.get("count").and_then(Value::as_f64) {
        Some(n) if n.fract() == 0.0 && (0.0..=1_000_000.0).contains(&n) => n as usize,
        _ => return Err(input_error("count is not an integer in 0..=1000000", "count")),
    };
    let mut rng = Xorshift32::new(seed);
    let values = (0..count).map(|_| Value::Number(rng.next_uint() as f64)).collect();
    Ok(Output::Json(obj(vec![
        ("state", Value::Number(rng.state as f64)),
        ("values", Value::Array(values)),
    ])))
}

fn encode_cmd(input: &Value) -> Result<Output, DetsimError> {
    let manifest = field(input, "manifest")?;
    let list = field(input, "payloads")?
        .as_array()
        .ok_or_else(|| input_error("payloads is not an array", "payloads"))?;
    let mut payloads = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| input_error(format!("payloads[{i}].name is not a string"), "name"))?;
        let bytes = base64_bytes(
            p.get("base64").unwrap_or(&Value::Null),
            &format!("payloads[{i}].base64"),
        )?;
        payloads.push((name.to_string(), bytes));
    }
    Ok(Output::Bytes(encode_envelope(manifest, &payloads)?))
}

fn decode_cmd(bytes: &[u8]) -> Result<Output, DetsimError> {
    let d = decode_envelope(bytes)?;
    let payloads = d
        .payloads
        .iter()
        .map(|(name, bytes)| {
            obj(vec![
                ("name", name.as_str().into()),
                ("base64", B64.encode(bytes).into()),
            ])
        })
        .collect();
    Ok(Output::Json(obj(vec![
        ("envelopeDigest", d.envelope_digest.into()),
        ("manifest", d.manifest),
        ("payloads", Value::Array(payloads)),
    ])))
}

fn error_json(e: &DetsimError) -> Value {
    let check = check_of(e).map_or(Value::Null, |c| Value::Number(c as f64));
    let field = e.field.as_ref().map_or(Value::Null, |f| f.as_str().into());
    obj(vec![
        ("reason", e.reason.as_str().into()),
        ("check", check),
        ("message", e.message.as_str().into()),
        ("field", field),
    ])
}

/// One batch request: the same commands, with byte inputs and outputs as base64.
fn batch_one(request: &Value) -> Value {
    let run = || -> Result<Output, DetsimError> {
        let op = field(request, "op")?.as_str().unwrap_or("");
        match op {
            "canonicalize" => canonicalize_cmd(&base64_bytes(field(request, "base64")?, "base64")?),
            "seed" => seed_cmd(request),
            "xorshift" => xorshift_cmd(request),
            "encode-envelope" => encode_cmd(request),
            "decode-envelope" => decode_cmd(&base64_bytes(field(request, "base64")?, "base64")?),
            other => Err(input_error(format!("unknown op {other:?}"), "op")),
        }
    };
    match run() {
        Ok(Output::Bytes(b)) => obj(vec![("ok", B64.encode(b).into())]),
        Ok(Output::Json(v)) => obj(vec![("ok", v)]),
        Err(e) => obj(vec![("error", error_json(&e))]),
    }
}

fn batch_cmd(input: &Value) -> Result<Output, DetsimError> {
    let requests = input
        .as_array()
        .ok_or_else(|| input_error("batch input is not an array", "$"))?;
    Ok(Output::Json(Value::Array(requests.iter().map(batch_one).collect())))
}

fn run(command: &str, stdin: &[u8]) -> Result<Output, DetsimError> {
    match command {
        "canonicalize" => canonicalize_cmd(stdin),
        "decode-envelope" => decode_cmd(stdin),
        "seed" => seed_cmd(&parse_strict(stdin)?),
        "xorshift" => xorshift_cmd(&parse_strict(stdin)?),
        "encode-envelope" => encode_cmd(&parse_strict(stdin)?),
        "batch" => batch_cmd(&parse_strict(stdin)?),
        _ => unreachable!("checked in main"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let commands = [
        "canonicalize",
        "seed",
        "xorshift",
        "encode-envelope",
        "decode-envelope",
        "batch",
    ];
    let command = match args.as_slice() {
        [c] if commands.contains(&c.as_str()) => c.clone(),
        [h] if h == "--help" || h == "-h" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut stdin = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut stdin) {
        eprintln!("detsim-formats: cannot read stdin: {e}");
        return ExitCode::from(2);
    }
    let output = match run(&command, &stdin) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("detsim-formats: [{}] {}", e.reason, e.message);
            // A file that fails verification is exit 1; anything else the user gave is exit 2.
            let verification = command == "decode-envelope";
            return ExitCode::from(if verification { 1 } else { 2 });
        }
    };
    let bytes = match output {
        Output::Bytes(b) => b,
        Output::Json(v) => match canonicalize(&v) {
            Ok(s) => s.into_bytes(),
            Err(e) => {
                eprintln!("detsim-formats: [{}] {}", e.reason, e.message);
                return ExitCode::from(2);
            }
        },
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(&bytes).and_then(|_| out.flush()).is_err() {
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}
