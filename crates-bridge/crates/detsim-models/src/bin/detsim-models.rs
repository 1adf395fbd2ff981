// detsim-models: the Rust agent models on the command line, for cross-language tests. Reads a
// JSON batch on stdin, writes canonical JSON results; refusals are per request, in-band.
// Not a worker (no gRPC): `batch` only.
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use detsim_formats::json::{Value, canonicalize, parse_strict};
use detsim_formats::{DetsimError, RationalNs, Reason};
use detsim_models::{Lif, StateValue, TickClock, Walker, decode_state, encode_state};
use std::io::{Read, Write};
use std::process::ExitCode;

const USAGE: &str = "usage: detsim-models batch < requests.json
  requests: [{\"op\": ..., ...}] → [{\"ok\": result} | {\"error\": {reason, message, field}}]
  ops: encode-state {value}            value: JSON, {\"$bin\": base64} for bytes → base64 msgpack
       decode-state {base64}           → value in the same JSON form ({\"$int\"}, {\"$bigint\"}, {\"$dtype\", ...} for the wide forms)
       reencode-state {base64}         → base64 of decode then encode (lossless: the same bytes)
       walker {seed, params, observation, steps: [{observation, rewards: [number]}], restoreEachStep}
                                       → {decisions: [{move}], captures: [base64]}
       lif {seed, params, observation, steps: [{ticks, observation, rewards: [number]}], restoreEachStep}
                                       → {decisions: [{move, spikes}], captures: [base64]}
       tick-clock {stepDuration, tickDuration, steps} → {ticks: [U64], brainTicks: U64, remainder}";

fn obj(members: Vec<(&str, Value)>) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn bad(message: impl Into<String>) -> DetsimError {
    DetsimError::new(Reason::StructInvalidField, message)
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, DetsimError> {
    v.get(key)
        .ok_or_else(|| DetsimError::at(Reason::StructMissingField, format!("{key} is missing"), key))
}

fn to_state(v: &Value) -> Result<StateValue, DetsimError> {
    Ok(match v {
        Value::Null => StateValue::Nil,
        Value::Bool(b) => StateValue::Bool(*b),
        Value::Number(n) => StateValue::Number(*n),
        Value::String(s) => StateValue::Str(s.clone()),
        Value::Array(items) => StateValue::Array(items.iter().map(to_state).collect::<Result<_, _>>()?),
        Value::Object(m) if m.len() == 1 && m[0].0 == "$bin" => StateValue::Bin(
            B64.decode(m[0].1.as_str().unwrap_or(""))
                .map_err(|e| bad(format!("$bin: {e}")))?,
        ),
        Value::Object(m) => StateValue::Map(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), to_state(v)?)))
                .collect::<Result<_, DetsimError>>()?,
        ),
    })
}

fn from_state(v: &StateValue) -> Value {
    match v {
        StateValue::Nil => Value::Null,
        StateValue::Bool(b) => Value::Bool(*b),
        StateValue::Number(n) => Value::Number(*n),
        StateValue::Str(s) => Value::String(s.clone()),
        StateValue::Bin(b) => obj(vec![("$bin", B64.encode(b).into())]),
        StateValue::Int(v) => obj(vec![("$int", v.to_string().into())]),
        StateValue::Uint(v) => obj(vec![("$int", v.to_string().into())]),
        StateValue::BigInt(b) => obj(vec![("$bigint", B64.encode(b).into())]),
        StateValue::NdArray { dtype, shape, data } => obj(vec![
            ("$dtype", dtype.as_str().into()),
            (
                "$shape",
                Value::Array(shape.iter().map(|&d| Value::Number(d as f64)).collect()),
            ),
            ("$data", B64.encode(data).into()),
        ]),
        StateValue::Array(items) => Value::Array(items.iter().map(from_state).collect()),
        StateValue::Map(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), from_state(v))).collect()),
    }
}

fn walker_op(req: &Value) -> Result<Value, DetsimError> {
    let seed = detsim_formats::scalars::read_i32(req.get("seed"), "seed")?;
    let params = field(req, "params")?;
    let restore_each = req.get("restoreEachStep") == Some(&Value::Bool(true));
    let mut walker = Walker::initialize(seed, params)?;
    let mut observation = field(req, "observation")?.clone();
    let (mut decisions, mut captures) = (vec![], vec![]);
    for step in field(req, "steps")?
        .as_array()
        .ok_or_else(|| bad("steps is not an array"))?
    {
        decisions.push(obj(vec![("move", walker.prepare(&observation).into())]));
        walker.commit(&rewards_of(step)?);
        observation = field(step, "observation")?.clone();
        let bytes = walker.capture()?;
        if restore_each {
            walker = Walker::restore(&bytes, params)?;
        }
        captures.push(Value::String(B64.encode(&bytes)));
    }
    Ok(obj(vec![
        ("decisions", Value::Array(decisions)),
        ("captures", Value::Array(captures)),
    ]))
}

fn rewards_of(step: &Value) -> Result<Vec<f64>, DetsimError> {
    field(step, "rewards")?
        .as_array()
        .ok_or_else(|| bad("rewards is not an array"))?
        .iter()
        .map(|r| r.as_f64().ok_or_else(|| bad("a reward is not a number")))
        .collect()
}

fn lif_op(req: &Value) -> Result<Value, DetsimError> {
    let seed = detsim_formats::scalars::read_i32(req.get("seed"), "seed")?;
    let params = field(req, "params")?;
    let restore_each = req.get("restoreEachStep") == Some(&Value::Bool(true));
    let mut lif = Lif::initialize(seed, params)?;
    let mut observation = field(req, "observation")?.clone();
    let (mut decisions, mut captures) = (vec![], vec![]);
    for step in field(req, "steps")?
        .as_array()
        .ok_or_else(|| bad("steps is not an array"))?
    {
        let ticks = step
            .get("ticks")
            .and_then(Value::as_f64)
            .filter(|t| t.fract() == 0.0 && (0.0..=1000.0).contains(t))
            .ok_or_else(|| bad("ticks"))?;
        let (mv, spikes) = lif.prepare(&observation, ticks as u64);
        let spikes = Value::Array(spikes.iter().map(|&s| Value::Number(s as f64)).collect());
        decisions.push(obj(vec![("move", mv.into()), ("spikes", spikes)]));
        lif.commit(&rewards_of(step)?);
        observation = field(step, "observation")?.clone();
        let bytes = lif.capture()?;
        if restore_each {
            lif = Lif::restore(&bytes, params)?;
        }
        captures.push(Value::String(B64.encode(&bytes)));
    }
    Ok(obj(vec![
        ("decisions", Value::Array(decisions)),
        ("captures", Value::Array(captures)),
    ]))
}

fn tick_clock_op(req: &Value) -> Result<Value, DetsimError> {
    let step = RationalNs::read_duration(req.get("stepDuration"), "stepDuration")?;
    let tick = RationalNs::read_duration(req.get("tickDuration"), "tickDuration")?;
    let steps = req
        .get("steps")
        .and_then(Value::as_f64)
        .filter(|n| n.fract() == 0.0 && (0.0..=10_000.0).contains(n))
        .ok_or_else(|| bad("steps"))?;
    let mut clock = TickClock::new(step, tick, RationalNs::ZERO, 0)?;
    let mut ticks = vec![];
    for _ in 0..steps as usize {
        ticks.push(Value::String(clock.advance()?.to_string()));
    }
    Ok(obj(vec![
        ("ticks", Value::Array(ticks)),
        ("brainTicks", Value::String(clock.brain_ticks.to_string())),
        ("remainder", clock.remainder()?.to_json()),
    ]))
}

fn one(req: &Value) -> Result<Value, DetsimError> {
    match field(req, "op")?.as_str().unwrap_or("") {
        "encode-state" => Ok(Value::String(
            B64.encode(encode_state(&to_state(field(req, "value")?)?)?),
        )),
        "decode-state" => {
            let bytes = B64
                .decode(field(req, "base64")?.as_str().unwrap_or(""))
                .map_err(|e| bad(format!("base64: {e}")))?;
            Ok(from_state(&decode_state(&bytes)?))
        }
        "reencode-state" => {
            let bytes = B64
                .decode(field(req, "base64")?.as_str().unwrap_or(""))
                .map_err(|e| bad(format!("base64: {e}")))?;
            Ok(Value::String(B64.encode(encode_state(&decode_state(&bytes)?)?)))
        }
        "walker" => walker_op(req),
        "lif" => lif_op(req),
        "tick-clock" => tick_clock_op(req),
        other => Err(bad(format!("unknown op {other:?}"))),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args != ["batch"] {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let mut stdin = Vec::new();
    if std::io::stdin().read_to_end(&mut stdin).is_err() {
        return ExitCode::from(2);
    }
    let requests = match parse_strict(&stdin) {
        Ok(Value::Array(items)) => items,
        Ok(_) => {
            eprintln!("detsim-models: [struct_invalid_field] batch input is not an array");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("detsim-models: [{}] {}", e.reason, e.message);
            return ExitCode::from(2);
        }
    };
    let results = requests
        .iter()
        .map(|r| match one(r) {
            Ok(v) => obj(vec![("ok", v)]),
            Err(e) => obj(vec![(
                "error",
                obj(vec![
                    ("reason", e.reason.as_str().into()),
                    ("message", e.message.as_str().into()),
                    ("field", e.field.as_deref().map_or(Value::Null, Value::from)),
                ]),
            )]),
        })
        .collect();
    match canonicalize(&Value::Array(results)) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            if out.write_all(text.as_bytes()).and_then(|_| out.flush()).is_err() {
                return ExitCode::from(2);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("detsim-models: [{}] {}", e.reason, e.message);
            ExitCode::from(2)
        }
    }
}
