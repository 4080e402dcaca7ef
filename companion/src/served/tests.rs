use machine_config::dataurl;

use super::*;

fn rendered(kernel_arguments: Value) -> MachineConfig {
    MachineConfig::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "rendered-worker-0123456789abcdef0123456789abcdef"},
        "spec": {
            "osImageURL": "quay.io/os@sha256:1",
            "kernelArguments": ["nosmt"],
            "kernelType": "default",
            "config": {
                "ignition": {"version": "3.5.0"},
                "kernelArguments": kernel_arguments,
                "storage": {"files": [{"path": "/etc/motd", "mode": 420, "overwrite": true,
                    "contents": {"source": "data:,hello%20world"}}]}
            }
        }
    }))
    .unwrap()
}

/// (path, mode, overwrite, decoded contents) of every file in a served spec 3 config.
fn files(served: &Value) -> Vec<(String, i64, bool, Vec<u8>)> {
    served["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["mode"].as_i64().unwrap(),
                f["overwrite"].as_bool().unwrap(),
                dataurl::decode(f["contents"]["source"].as_str().unwrap())
                    .unwrap()
                    .data,
            )
        })
        .collect()
}

#[test]
fn appended_files_decode_to_what_the_mcs_writes() {
    let mc = rendered(json!({}));
    for spec in [SpecVersion::V3_1, SpecVersion::V3_4, SpecVersion::V3_5] {
        let body = build(&mc, spec).unwrap();
        let served: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(served["ignition"]["version"], spec.to_string());
        let files = files(&served);
        let paths: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(
            paths,
            ["/etc/motd", NODE_ANNOTATIONS, SERVED_CONTENT, ENCAPSULATED]
        );
        for (path, mode, overwrite, _) in &files[1..] {
            // The MachineConfig holds secrets: only root reads it.
            let expected = if path == SERVED_CONTENT { 0o600 } else { 0o644 };
            assert_eq!((*mode, *overwrite), (expected, true), "{path}");
        }
        assert_eq!(files[0].3, b"hello world");

        let annotations: Value = serde_json::from_slice(&files[1].3).unwrap();
        let name = mc.name();
        assert_eq!(
            annotations,
            json!({
                "machineconfiguration.openshift.io/currentConfig": name,
                "machineconfiguration.openshift.io/desiredConfig": name,
                "machineconfiguration.openshift.io/firstPivotConfig": name,
                "machineconfiguration.openshift.io/state": "Done",
            })
        );
        let content_text = String::from_utf8(files[2].3.clone()).unwrap();
        assert!(
            content_text.starts_with("{\n    \"apiVersion\""),
            "4-space indent"
        );
        assert_eq!(MachineConfig::from_slice(&files[2].3).unwrap(), mc);

        let encapsulated = MachineConfig::from_slice(&files[3].3).unwrap();
        assert_eq!(
            encapsulated
                .spec
                .config
                .as_ref()
                .map(|c| c.to_value().unwrap()),
            Some(json!({"ignition": {"version": spec.to_string()}}))
        );
        assert_eq!(encapsulated.name(), name);
        assert_eq!(encapsulated.spec.kernel_arguments, ["nosmt"]);
        assert_eq!(encapsulated.spec.os_image_url, "quay.io/os@sha256:1");
        // compact JSON
        assert!(!files[3].3.contains(&b'\n'));
        // the served config is a valid config of its spec
        machine_config::Config::from_value(served).unwrap();
    }
}

#[test]
fn kernel_arguments_move_below_3_3_and_stay_above() {
    let mc = rendered(json!({"shouldExist": ["console=ttyS0"]}));
    let served: Value = serde_json::from_slice(&build(&mc, SpecVersion::V3_2).unwrap()).unwrap();
    assert!(served.get("kernelArguments").is_none());
    let files = files(&served);
    for file in &files[2..] {
        let copy = MachineConfig::from_slice(&file.3).unwrap();
        assert_eq!(
            copy.spec.kernel_arguments,
            ["nosmt", "console=ttyS0"],
            "{}",
            file.0
        );
    }
    let served: Value = serde_json::from_slice(&build(&mc, SpecVersion::V3_3).unwrap()).unwrap();
    assert_eq!(
        served["kernelArguments"],
        json!({"shouldExist": ["console=ttyS0"]})
    );

    let refused = rendered(json!({"shouldNotExist": ["quiet"]}));
    let err = build(&refused, SpecVersion::V3_1).unwrap_err().to_string();
    assert!(err.contains("kernelArguments.shouldNotExist"), "{err}");
    build(&refused, SpecVersion::V3_5).unwrap();
}

#[test]
fn spec_2_2_carries_the_appended_files_on_the_root_filesystem() {
    let mc = rendered(json!({}));
    let served: Value = serde_json::from_slice(&build(&mc, SpecVersion::V2_2).unwrap()).unwrap();
    assert_eq!(served["ignition"]["version"], "2.2.0");
    let last = served["storage"]["files"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["filesystem"], "root");
    assert_eq!(last["path"], ENCAPSULATED);
    let encapsulated = MachineConfig::from_slice(
        &dataurl::decode(last["contents"]["source"].as_str().unwrap())
            .unwrap()
            .data,
    )
    .unwrap();
    assert_eq!(
        encapsulated
            .spec
            .config
            .as_ref()
            .map(|c| c.to_value().unwrap()),
        Some(json!({"ignition": {"version": "2.2.0"}}))
    );
    machine_config::Config::from_value(served).unwrap();
}

#[test]
fn cache_builds_once_per_name_and_spec() {
    let cache = ServeCache::default();
    let mc = rendered(json!({}));
    let a = cache.get_or_build(&mc, SpecVersion::V3_2).unwrap();
    let b = cache.get_or_build(&mc, SpecVersion::V3_2).unwrap();
    assert_eq!(a.as_ptr(), b.as_ptr(), "served from the cache, not rebuilt");
    cache.get_or_build(&mc, SpecVersion::V2_2).unwrap();
    assert_eq!(cache.len(), 2);
    cache.retain(|name| name != mc.name());
    assert!(cache.is_empty());
}

#[test]
fn cache_is_bounded_by_bytes_and_keeps_what_is_served() {
    let cache = ServeCache::default();
    // A config whose body is about 1 MiB, under names of its own.
    let big = format!("data:;base64,{}", "QUFB".repeat(256 * 1024 / 3 * 4));
    let with_name = |name: &str| {
        let mut mc = rendered(json!({"storage": {"files": [
            {"path": "/etc/big", "contents": {"source": big}}]}}));
        mc.metadata.name = Some(name.to_string());
        mc
    };
    let hot = with_name("rendered-worker-hot");
    let hot_body = cache.get_or_build(&hot, SpecVersion::V3_5).unwrap();
    let each = hot_body.len();
    assert!(each > 1 << 20, "{each}");
    for i in 0..(ServeCache::BUDGET_BYTES / each + 5) {
        cache
            .get_or_build(
                &with_name(&format!("rendered-worker-{i}")),
                SpecVersion::V3_5,
            )
            .unwrap();
        // Served again all along: the least recently served leave, not this one.
        let again = cache.get_or_build(&hot, SpecVersion::V3_5).unwrap();
        assert_eq!(again.as_ptr(), hot_body.as_ptr(), "after {i}");
        assert!(cache.bytes() <= ServeCache::BUDGET_BYTES, "after {i}");
    }
    // Full up to the last body that fits (names differ in length by a few bytes).
    assert!(cache.bytes() > ServeCache::BUDGET_BYTES - 2 * each);
    assert!(cache.len() >= ServeCache::BUDGET_BYTES / each - 1);
    // A single body over the budget is still kept (until the next one).
    let small = ServeCache::default();
    small.get_or_build(&hot, SpecVersion::V3_2).unwrap();
    assert_eq!(small.len(), 1);
    small.retain(|_| false);
    assert_eq!((small.len(), small.bytes()), (0, 0));
}

#[test]
fn a_body_holds_no_spare_capacity() {
    let body = build(&rendered(json!({})), SpecVersion::V3_5).unwrap();
    // A unique `Bytes` made from a `Vec` gives that `Vec` back as it was, capacity included.
    let at = body.as_ptr();
    let vec = Vec::from(body);
    assert_eq!(vec.as_ptr(), at, "the body's own buffer, not a copy");
    assert_eq!(vec.capacity(), vec.len());
}

#[test]
fn requests_arriving_together_share_one_build() {
    let cache = ServeCache::default();
    let big = format!("data:;base64,{}", "QUFB".repeat(64 * 1024));
    let mc = rendered(json!({}));
    let mut mc_big = mc.clone();
    mc_big.spec.config = Some(IgnitionJson::from_value(json!({
        "ignition": {"version": "3.5.0"},
        "storage": {"files": [{"path": "/etc/big", "contents": {"source": big}}]}
    })));
    let bodies: Vec<Bytes> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|_| s.spawn(|| cache.get_or_build(&mc_big, SpecVersion::V3_5).unwrap()))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    // Each request built its own body before: equal bytes, different buffers.
    assert!(
        bodies.iter().all(|b| b.as_ptr() == bodies[0].as_ptr()),
        "every request got the one body built"
    );
    assert_eq!(cache.len(), 1);
}
