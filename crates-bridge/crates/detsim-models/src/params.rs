// Model parameters as the TypeScript SDK reads them (workers/sdk.ts onlyParams + intParam): one
// optional integer field in a range, nothing else, `null` counting as absent. Shared by the
// built-in models; not a general params schema.
use detsim_formats::json::{Value, js_stringify};
use detsim_formats::{DetsimError, Reason};

/// A model refusing its params or payload (the TypeScript models' error reason).
pub fn model_error(message: String) -> DetsimError {
    DetsimError::new(Reason::StructInvalidField, message)
}

/// `params` may hold only `name`, an integer in [min, max]; absent or null gives `default`.
pub fn only_int_param(params: &Value, name: &str, default: u32, min: u32, max: u32) -> Result<u32, DetsimError> {
    let members = params
        .as_object()
        .ok_or_else(|| model_error("params: not an object".into()))?;
    let mut keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_by(|a, b| detsim_formats::json::compare_utf16(a, b));
    if let Some(key) = keys.into_iter().find(|k| *k != name) {
        return Err(model_error(format!(
            "params: unknown field {} (allowed: {name})",
            js_stringify(&Value::String(key.into()))
        )));
    }
    match params.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) if n.fract() == 0.0 && (min as f64..=max as f64).contains(n) => Ok(*n as u32),
        Some(v) => Err(model_error(format!(
            "params.{name}: {} must be an integer in [{min}, {max}]",
            js_stringify(v)
        ))),
    }
}
