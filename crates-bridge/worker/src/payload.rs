// Conversions between protocol JSON values and state-codec values, for capture payloads: JSON
// goes in as msgpack maps/arrays/numbers; a payload's JSON-typed fields come back out. Not the
// codec itself (detsim_models::state_codec) and not the payload's checks (agent_host.rs).
use detsim_formats::Value;
use detsim_models::StateValue;

pub fn to_state(value: &Value) -> StateValue {
    match value {
        Value::Null => StateValue::Nil,
        Value::Bool(b) => StateValue::Bool(*b),
        Value::Number(n) => StateValue::Number(*n),
        Value::String(s) => StateValue::Str(s.clone()),
        Value::Array(items) => StateValue::Array(items.iter().map(to_state).collect()),
        Value::Object(members) => StateValue::Map(members.iter().map(|(k, v)| (k.clone(), to_state(v))).collect()),
    }
}

/// Back to JSON; None when the data holds bytes (JSON has no binary type).
pub fn to_json(value: &StateValue) -> Option<Value> {
    Some(match value {
        StateValue::Nil => Value::Null,
        StateValue::Bool(b) => Value::Bool(*b),
        StateValue::Number(n) => Value::Number(*n),
        StateValue::Str(s) => Value::String(s.clone()),
        StateValue::Bin(_) | StateValue::BigInt(_) | StateValue::NdArray { .. } => return None,
        // JSON numbers are exact up to 2^53 only.
        StateValue::Int(v) if v.unsigned_abs() <= 1 << 53 => Value::Number(*v as f64),
        StateValue::Uint(v) if *v <= 1 << 53 => Value::Number(*v as f64),
        StateValue::Int(_) | StateValue::Uint(_) => return None,
        StateValue::Array(items) => Value::Array(items.iter().map(to_json).collect::<Option<Vec<_>>>()?),
        StateValue::Map(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| Some((k.clone(), to_json(v)?)))
                .collect::<Option<Vec<_>>>()?,
        ),
    })
}

pub fn get<'a>(members: &'a [(String, StateValue)], key: &str) -> Option<&'a StateValue> {
    members.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}
