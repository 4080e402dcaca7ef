//! Reading YAML or JSON documents into JSON values (telling a MachineConfig from a bare
//! Ignition config is the agent's `input::LoadedConfig`).
//!
//! YAML is read with the YAML 1.1 rules the MCO depends on: `mode: 0755` is the octal integer
//! 493 (as Go's YAML 1.1 decoder reads it), `y`/`yes`/`on` are booleans; duplicate keys are an
//! error.

use serde_json::Value;

use crate::error::ParseError;

/// Decodes YAML or JSON bytes (JSON when the first non-blank character is `{`).
pub fn parse_value(bytes: &[u8]) -> Result<Value, ParseError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        return serde_json::from_slice(bytes).map_err(|e| ParseError::Syntax {
            format: "JSON",
            message: e.to_string(),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError::Syntax {
        format: "YAML",
        message: format!("not UTF-8: {e}"),
    })?;
    // No source snippet: a syntax error is reported as one line (`line 5 column 2: ...`).
    let options = serde_saphyr::options! { legacy_octal_numbers: true, with_snippet: false };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| ParseError::Syntax {
        format: "YAML",
        message: e.to_string(),
    })
}
