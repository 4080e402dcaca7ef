//! The schema tables against the facts they encode.

use serde_json::json;

use super::*;

/// `(dotted field pattern, minor)` for every field a minor added under fields that older minors
/// already knew, `*` standing for a list index.
fn added_fields(shape: &Shape, pattern: &str, known_since: u8, out: &mut Vec<(String, u8)>) {
    match shape {
        Shape::Object(fields) => {
            for field in fields.iter() {
                let child = if pattern.is_empty() {
                    field.name.to_string()
                } else {
                    format!("{pattern}.{}", field.name)
                };
                if field.since > known_since {
                    out.push((child.clone(), field.since));
                }
                added_fields(&field.shape, &child, field.since.max(known_since), out);
            }
        }
        Shape::Array(item) => added_fields(item, &format!("{pattern}.*"), known_since, out),
        _ => {}
    }
}

/// What Ignition's `config/v3_{0..5}/types/schema.go` field sets say each minor added.
#[test]
fn the_fields_each_minor_added() {
    let mut found = Vec::new();
    added_fields(&V3, "", 0, &mut found);
    found.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    let expected: Vec<(String, u8)> = [
        ("ignition.config.merge.*.compression", 1),
        ("ignition.config.merge.*.httpHeaders", 1),
        ("ignition.config.replace.compression", 1),
        ("ignition.config.replace.httpHeaders", 1),
        ("ignition.proxy", 1),
        (
            "ignition.security.tls.certificateAuthorities.*.compression",
            1,
        ),
        (
            "ignition.security.tls.certificateAuthorities.*.httpHeaders",
            1,
        ),
        ("storage.files.*.append.*.httpHeaders", 1),
        ("storage.files.*.contents.httpHeaders", 1),
        ("storage.filesystems.*.mountOptions", 1),
        ("passwd.groups.*.shouldExist", 2),
        ("passwd.users.*.shouldExist", 2),
        ("storage.disks.*.partitions.*.resize", 2),
        ("storage.luks", 2),
        ("kernelArguments", 3),
        ("storage.luks.*.clevis.tang.*.advertisement", 4),
        ("storage.luks.*.discard", 4),
        ("storage.luks.*.openOptions", 4),
        ("storage.luks.*.cex", 5),
    ]
    .iter()
    .map(|(p, m)| (p.to_string(), *m))
    .collect();
    let mut expected = expected;
    expected.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    assert_eq!(found, expected);
}

/// (shape, value, the gates' minors)
#[test]
fn value_gates_by_the_field_holding_the_value() {
    let cases: &[(&Shape, serde_json::Value, &[u8])] = &[
        (&Shape::Hash, json!("sha256-00"), &[1]),
        (&Shape::Hash, json!("sha512-00"), &[]),
        (&Shape::Source, json!("gs://bucket/x"), &[2]),
        (
            &Shape::Source,
            json!("arn:aws:s3:us-east-1:1:accesspoint/a/object/x"),
            &[4],
        ),
        (&Shape::Source, json!("https://example.com/x"), &[]),
        (&Shape::FsFormat, json!("none"), &[3]),
        (&Shape::FsFormat, json!("xfs"), &[]),
        (&Shape::Leaf, json!("gs://bucket/x"), &[]),
        (&Shape::Leaf, json!("none"), &[]),
        (&Shape::Source, json!(1), &[]),
        (&Shape::Mode, json!(0o1777), &[4]),
        (&Shape::Mode, json!(0o755), &[]),
        (&Shape::Leaf, json!(0o1777), &[]),
    ];
    for (shape, value, minors) in cases {
        let text = value.as_str().unwrap_or_default();
        let found: Vec<u8> = value_gates(shape, text, value).map(|g| g.since).collect();
        assert_eq!(found, *minors, "{value}");
    }
}
