use super::*;
use serde_json::json;

/// (name, parent, child, expected)
#[test]
fn ignition_merge_table() {
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "files merge by path in place, new ones appended, fields kept when omitted",
            json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [
                {"path": "/a", "mode": 420, "contents": {"source": "data:,x"}},
                {"path": "/c", "contents": {"source": "data:,c"}}]}}),
            json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"path": "/b", "contents": {"source": "data:,b"}},
                {"path": "/a", "contents": {"source": "data:,y"}, "overwrite": false}]}}),
            json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"path": "/a", "mode": 420, "contents": {"source": "data:,y"}, "overwrite": false},
                {"path": "/c", "contents": {"source": "data:,c"}},
                {"path": "/b", "contents": {"source": "data:,b"}}]}}),
        ),
        (
            "a child link replaces the parent's file at the same path",
            json!({"storage": {"files": [{"path": "/x", "contents": {"source": "data:,x"}}, {"path": "/y"}]}}),
            json!({"storage": {"links": [{"path": "/x", "target": "/y"}]}}),
            json!({"storage": {"files": [{"path": "/y"}], "links": [{"path": "/x", "target": "/y"}]}}),
        ),
        (
            "the only parent entry replaced from another list leaves no empty list",
            json!({"storage": {"directories": [{"path": "/d"}]}}),
            json!({"storage": {"files": [{"path": "/d"}]}}),
            json!({"storage": {"files": [{"path": "/d"}]}}),
        ),
        (
            "units by name, dropins by name, omitted contents kept",
            json!({"systemd": {"units": [{"name": "a.service", "contents": "A", "enabled": true,
                "dropins": [{"name": "1.conf", "contents": "one"}]}]}}),
            json!({"systemd": {"units": [{"name": "a.service", "enabled": false,
                "dropins": [{"name": "1.conf", "contents": "uno"}, {"name": "2.conf", "contents": "two"}]},
                {"name": "b.service", "mask": true}]}}),
            json!({"systemd": {"units": [{"name": "a.service", "contents": "A", "enabled": false,
                "dropins": [{"name": "1.conf", "contents": "uno"}, {"name": "2.conf", "contents": "two"}]},
                {"name": "b.service", "mask": true}]}}),
        ),
        (
            "file appends concatenate",
            json!({"storage": {"files": [{"path": "/a", "append": [{"source": "data:,1"}]}]}}),
            json!({"storage": {"files": [{"path": "/a", "append": [{"source": "data:,1"}, {"source": "data:,2"}]}]}}),
            json!({"storage": {"files": [{"path": "/a", "append": [
                {"source": "data:,1"}, {"source": "data:,1"}, {"source": "data:,2"}]}]}}),
        ),
        (
            "kernel arguments share a key space",
            json!({"kernelArguments": {"shouldExist": ["a", "b"], "shouldNotExist": ["c"]}}),
            json!({"kernelArguments": {"shouldExist": ["c"], "shouldNotExist": ["a"]}}),
            json!({"kernelArguments": {"shouldExist": ["b", "c"], "shouldNotExist": ["a"]}}),
        ),
        (
            "users by name, ssh keys by value",
            json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"]}]}}),
            json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k2", "k3"]}, {"name": "x"}]}}),
            json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2", "k3"]}, {"name": "x"}]}}),
        ),
        (
            "an HTTP header without value deletes the parent's",
            json!({"ignition": {"config": {"merge": [{"source": "https://a", "httpHeaders": [
                {"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}}),
            json!({"ignition": {"config": {"merge": [{"source": "https://a", "httpHeaders": [
                {"name": "A"}, {"name": "B", "value": "3"}]}]}}}),
            json!({"ignition": {"config": {"merge": [{"source": "https://a", "httpHeaders": [
                {"name": "B", "value": "3"}]}]}}}),
        ),
        (
            "partitions key on number, else label",
            json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
                {"label": "root", "number": 4, "sizeMiB": 10}, {"label": "var", "sizeMiB": 1}]}]}}),
            json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
                {"number": 4, "sizeMiB": 20}, {"label": "var", "sizeMiB": 2}, {"label": "root"}]}]}}),
            json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
                {"label": "root", "number": 4, "sizeMiB": 20}, {"label": "var", "sizeMiB": 2}, {"label": "root"}]}]}}),
        ),
        (
            "null in the child keeps the parent's value; filesystems by device, options concatenated",
            json!({"storage": {"filesystems": [{"device": "/dev/b", "format": "xfs", "options": ["-f"]}]}}),
            json!({"storage": {"filesystems": [{"device": "/dev/b", "format": null, "label": "v", "options": ["-f"]}]}}),
            json!({"storage": {"filesystems": [{"device": "/dev/b", "format": "xfs", "label": "v", "options": ["-f", "-f"]}]}}),
        ),
    ];
    for (name, parent, child, expected) in cases {
        assert_eq!(merge_ignition(&parent, &child), expected, "{name}");
    }
}

#[test]
fn merge_is_associative_for_files_and_units() {
    let a = json!({"storage": {"files": [{"path": "/1", "mode": 420}]}, "systemd": {"units": [{"name": "u", "contents": "a"}]}});
    let b = json!({"storage": {"files": [{"path": "/1", "mode": 384}, {"path": "/2"}]}});
    let c = json!({"systemd": {"units": [{"name": "u", "enabled": true}]}, "storage": {"links": [{"path": "/2", "target": "/1"}]}});
    let left = merge_ignition(&merge_ignition(&a, &b), &c);
    let right = merge_ignition(&a, &merge_ignition(&b, &c));
    assert_eq!(left, right);
    assert_eq!(
        left,
        json!({"storage": {"files": [{"path": "/1", "mode": 384}], "links": [{"path": "/2", "target": "/1"}]},
            "systemd": {"units": [{"name": "u", "contents": "a", "enabled": true}]}})
    );
}
