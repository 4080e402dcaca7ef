//! [`parse_json_file`]: sources left in the file, read back when used.

use std::path::PathBuf;

use super::*;

/// A file of its own under the temp directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let path =
            std::env::temp_dir().join(format!("mc-source-file-{}-{name}.json", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn sources_of(value: &Value, sources: &SourceTable) -> Vec<Source> {
    let files = value["storage"]["files"].as_array().unwrap();
    files
        .iter()
        .map(|f| {
            let index = f["contents"]["source"].as_str().unwrap();
            sources.lookup(index).unwrap()
        })
        .collect()
}

#[test]
fn unescaped_sources_stay_in_the_file_and_escaped_ones_are_copied() {
    let big = format!("data:;base64,{}", "QUJD".repeat(50_000));
    let doc = format!(
        r#"{{"ignition":{{"version":"3.4.0"}},"metadata":{{"source":"kept"}},
        "storage":{{"files":[
        {{"path":"/etc/a","contents":{{"source":"data:,a"}}}},
        {{"path":"/etc/b","contents":{{"source":"data:,b\/c"}}}},
        {{"path":"/etc/c","contents":{{"source":"data:,\"q"}}}},
        {{"path":"/etc/d","contents":{{"source":"data:,x\\"}}}},
        {{"path":"/etc/e","contents":{{"source":"data:,\u00e9t\u00e9"}}}},
        {{"path":"/etc/f","contents":{{"source":"{big}"}}}},
        {{"path":"/etc/g","contents":{{"source":"data:,été"}}}},
        {{"path":"/etc/h","contents":{{"source":""}}}}]}}}}"#
    );
    for (name, bytes, offset) in [
        ("plain", doc.clone().into_bytes(), 0),
        (
            "bom",
            [b"\xEF\xBB\xBF".as_slice(), doc.as_bytes()].concat(),
            3,
        ),
    ] {
        let tmp = TempFile::new(name, &bytes);
        let file = SourceFile::open(&tmp.0).unwrap();
        let (value, sources) = parse_json_file(&file, offset).unwrap();
        let (plain_value, plain_sources) = parse_json_document(doc.clone()).unwrap();
        let ign = IgnitionJson::from_parts(value.clone(), sources.clone());
        let plain = IgnitionJson::from_parts(plain_value, plain_sources);
        assert_eq!(ign, plain, "{name}");
        assert_eq!(
            ign.to_value().unwrap(),
            serde_json::from_str::<Value>(&doc).unwrap()
        );
        let got = sources_of(&value, &sources);
        let texts: Vec<String> = got.iter().map(|s| s.text().unwrap().into_owned()).collect();
        assert_eq!(
            texts,
            [
                "data:,a",
                "data:,b/c",
                "data:,\"q",
                "data:,x\\",
                "data:,été",
                big.as_str(),
                "data:,été",
                ""
            ],
            "{name}"
        );
        let kept: Vec<bool> = got.iter().map(Source::kept_in_file).collect();
        assert_eq!(
            kept,
            [true, false, false, false, false, true, true, true],
            "{name}: only the sources written without escapes stay in the file"
        );
        assert_eq!(got[5].len(), big.len());
        // The big file decodes from the file, whole or streamed.
        let file = crate::ignition::File {
            path: "/etc/f".into(),
            contents: crate::ignition::Resource {
                source: Some(got[5].clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(file.decoded_contents().unwrap(), b"ABC".repeat(50_000));
        let mut streamed = Vec::new();
        std::io::Read::read_to_end(
            &mut crate::ContentsReader::new(&file).unwrap(),
            &mut streamed,
        )
        .unwrap();
        assert_eq!(streamed, b"ABC".repeat(50_000));
        assert_eq!(
            serde_json::to_string(&ign).unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
    }
}

#[test]
fn a_file_changed_in_place_is_refused_and_one_replaced_by_a_rename_is_not() {
    let doc = r#"{"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,abc"}}]}}"#;
    let tmp = TempFile::new("changed", doc.as_bytes());
    let file = SourceFile::open(&tmp.0).unwrap();
    let (value, sources) = parse_json_file(&file, 0).unwrap();
    let source = sources_of(&value, &sources).remove(0);
    assert!(source.kept_in_file());

    // Replaced by a rename (as `currentconfig` is): the open file still holds the source.
    let next = TempFile::new("changed-next", b"{}");
    std::fs::rename(&next.0, &tmp.0).unwrap();
    assert_eq!(source.text().unwrap(), "data:,abc");

    // Written in place: the offsets mean nothing any more.
    let tmp2 = TempFile::new("changed-2", doc.as_bytes());
    let file = SourceFile::open(&tmp2.0).unwrap();
    let (value, sources) = parse_json_file(&file, 0).unwrap();
    let source = sources_of(&value, &sources).remove(0);
    std::fs::write(&tmp2.0, doc.replace("abc", "xyz")).unwrap();
    let err = source.text().unwrap_err().to_string();
    assert!(err.contains("changed after it was read"), "{err}");
    assert!(err.contains(&tmp2.0.display().to_string()), "{err}");
    // An unreadable source equals nothing, and serializing says why.
    assert_ne!(source, Source::from("data:,xyz"));
    let ign = IgnitionJson::from_parts(value, sources);
    let err = serde_json::to_string(&ign).unwrap_err().to_string();
    assert!(err.contains("changed after it was read"), "{err}");
}

#[test]
fn syntax_errors_are_the_in_memory_parser_s() {
    for doc in [
        r#"{"a": }"#,
        r#"{"a": "b""#,
        "{\"a\":\n [1, 2,]}",
        r#"{"a": 1} x"#,
        r#"{"source": "\x"}"#,
    ] {
        let tmp = TempFile::new("syntax", doc.as_bytes());
        let file = SourceFile::open(&tmp.0).unwrap();
        let streamed = parse_json_file(&file, 0).unwrap_err().to_string();
        let in_memory = parse_json_document(doc.to_string())
            .unwrap_err()
            .to_string();
        assert_eq!(streamed, in_memory, "{doc}");
    }
}
