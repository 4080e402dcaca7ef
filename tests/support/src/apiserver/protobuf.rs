//! The few Kubernetes protobuf bodies clients send this server: kubectl's typed clients post
//! SelfSubjectAccessReviews, SelfSubjectRulesReviews and SelfSubjectReviews as
//! `application/vnd.kubernetes.protobuf` (a `k8s\0` magic, then a runtime.Unknown envelope
//! around the object). They are turned into the JSON the rest of the server works on; answers
//! go out as JSON, which those clients also accept.

use serde_json::{Map, Value, json};

use super::status::ApiError;

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// A field's value: only length-delimited ones (strings, messages) are read.
enum Wire<'a> {
    Scalar,
    Bytes(&'a [u8]),
}

fn varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn fields(data: &[u8]) -> Option<Vec<(u64, Wire<'_>)>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < data.len() {
        let key = varint(data, &mut pos)?;
        let wire = match key & 7 {
            0 => {
                varint(data, &mut pos)?;
                Wire::Scalar
            }
            2 => {
                let len = usize::try_from(varint(data, &mut pos)?).ok()?;
                let bytes = data.get(pos..pos.checked_add(len)?)?;
                pos += len;
                Wire::Bytes(bytes)
            }
            1 => {
                pos = pos.checked_add(8)?;
                continue;
            }
            5 => {
                pos = pos.checked_add(4)?;
                continue;
            }
            _ => return None,
        };
        out.push((key >> 3, wire));
    }
    Some(out)
}

fn message(data: &[u8], number: u64) -> Option<&[u8]> {
    fields(data)?.into_iter().find_map(|(n, w)| match w {
        Wire::Bytes(b) if n == number => Some(b),
        _ => None,
    })
}

/// The string fields of a message, by field number, as a JSON object with `names`.
fn strings(data: &[u8], names: &[(u64, &str)]) -> Value {
    let mut object = Map::new();
    for (number, wire) in fields(data).unwrap_or_default() {
        if let (Some((_, name)), Wire::Bytes(bytes)) =
            (names.iter().find(|(n, _)| *n == number), wire)
        {
            object.insert(
                name.to_string(),
                json!(String::from_utf8_lossy(bytes).into_owned()),
            );
        }
    }
    Value::Object(object)
}

/// Decodes a review of `kind` from a protobuf body into its JSON form.
pub fn decode_review(kind: &str, body: &[u8]) -> Result<Value, ApiError> {
    let bad = || ApiError::bad_request(format!("the protobuf body is not a {kind}"));
    let envelope = body.strip_prefix(b"k8s\0").ok_or_else(bad)?;
    let raw = message(envelope, 2).ok_or_else(bad)?;
    let spec = message(raw, 2).unwrap_or_default();
    let spec = match kind {
        "SelfSubjectAccessReview" => {
            let mut out = Map::new();
            if let Some(attrs) = message(spec, 1) {
                let names = [
                    (1, "namespace"),
                    (2, "verb"),
                    (3, "group"),
                    (4, "version"),
                    (5, "resource"),
                    (6, "subresource"),
                    (7, "name"),
                ];
                out.insert("resourceAttributes".into(), strings(attrs, &names));
            }
            if let Some(attrs) = message(spec, 2) {
                let names = [(1, "path"), (2, "verb")];
                out.insert("nonResourceAttributes".into(), strings(attrs, &names));
            }
            Value::Object(out)
        }
        "SelfSubjectRulesReview" => strings(spec, &[(1, "namespace")]),
        _ => json!({}),
    };
    Ok(json!({"kind": kind, "spec": spec}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3 | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn access_review_from_kubectl_bytes() {
        let attrs = [field(2, b"get"), field(5, b"nodes"), field(7, b"n1")].concat();
        let spec = field(1, &attrs);
        let review = [field(1, b""), field(2, &spec)].concat();
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let envelope = [
            field(1, &type_meta),
            field(2, &review),
            field(4, CONTENT_TYPE.as_bytes()),
        ]
        .concat();
        let body = [b"k8s\0".as_slice(), &envelope].concat();
        let decoded = decode_review("SelfSubjectAccessReview", &body).unwrap();
        assert_eq!(
            decoded["spec"]["resourceAttributes"],
            json!({"verb": "get", "resource": "nodes", "name": "n1"})
        );
        assert!(decode_review("SelfSubjectAccessReview", b"{}").is_err());
        assert!(decode_review("SelfSubjectAccessReview", b"k8s\0\xff").is_err());
    }
}
