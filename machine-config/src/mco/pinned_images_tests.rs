use super::*;
use crate::mco::node_conditions::{Condition, Status, UPDATED};

#[test]
fn the_drop_in_is_the_mcds_toml() {
    let images = union([
        "quay.io/b@sha256:2",
        " quay.io/a@sha256:1 ",
        "quay.io/b@sha256:2",
        "",
    ]);
    assert_eq!(images, ["quay.io/a@sha256:1", "quay.io/b@sha256:2"]);
    let text = crio_drop_in(&images);
    assert_eq!(
        text,
        "[crio]\n  [crio.image]\n    pinned_images = [\"quay.io/a@sha256:1\", \"quay.io/b@sha256:2\"]\n"
    );
    // CRI-O reads it as TOML.
    let parsed: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(
        parsed["crio"]["image"]["pinned_images"][1].as_str(),
        Some("quay.io/b@sha256:2")
    );
    assert!(drop_in_current(&format!("\n{text}\n\n"), &text));
    assert!(!drop_in_current(&crio_drop_in(&images[..1]), &text));
}

fn amd64() -> Platform {
    Platform {
        os: "linux".into(),
        architecture: "amd64".into(),
        variant: None,
    }
}

#[test]
fn sizes_come_from_an_images_layers_or_its_platforms_entry() {
    let image = r#"{"schemaVersion":2,"config":{"digest":"sha256:c","size":9},
        "layers":[{"digest":"sha256:l1","size":100},{"digest":"sha256:l2","size":20}]}"#;
    assert_eq!(
        image_bytes(image, &amd64()),
        Ok(ImageBytes::Layers(vec![
            ("sha256:l1".into(), 100),
            ("sha256:l2".into(), 20)
        ]))
    );
    let list = r#"{"schemaVersion":2,"manifests":[
        {"digest":"sha256:arm","platform":{"os":"linux","architecture":"arm64","variant":"v8"}},
        {"digest":"sha256:x86","platform":{"os":"linux","architecture":"amd64"}}]}"#;
    assert_eq!(
        image_bytes(list, &amd64()),
        Ok(ImageBytes::Entry("sha256:x86".into()))
    );
    let arm = Platform {
        os: "linux".into(),
        architecture: "arm64".into(),
        variant: Some("v8".into()),
    };
    assert_eq!(
        image_bytes(list, &arm),
        Ok(ImageBytes::Entry("sha256:arm".into()))
    );
    let s390 = Platform {
        os: "linux".into(),
        architecture: "s390x".into(),
        variant: None,
    };
    assert_eq!(
        image_bytes(list, &s390),
        Err("the manifest list has no image for linux/s390x".into())
    );
    assert!(
        image_bytes("{", &amd64())
            .unwrap_err()
            .starts_with("the manifest is not JSON")
    );
    assert_eq!(
        image_bytes("{}", &amd64()),
        Err("the manifest has neither layers nor manifests".into())
    );
}

#[test]
fn the_storage_rule() {
    const GI: i64 = 1024 * 1024 * 1024;
    assert_eq!(
        check_storage(10 * GI, 0),
        Err(format!(
            "storage available is less than minimum required capacity: {}, required: {}",
            10 * GI,
            16 * GI
        ))
    );
    assert_eq!(check_storage(20 * GI, GI), Ok(()));
    // twice 2Gi is all that is left above the 16Gi kept free: refused
    assert_eq!(
        check_storage(20 * GI, 2 * GI),
        Err(INSUFFICIENT_STORAGE.to_string())
    );
    assert_eq!(
        check_storage(20 * GI, i64::MAX),
        Err(INSUFFICIENT_STORAGE.into())
    );
    assert!(is_no_space(
        "write /var/lib/containers/x: no space left on device"
    ));
    assert!(!is_no_space("manifest unknown"));
}

#[test]
fn conditions_with_the_mcds_reasons_and_messages() {
    let text = |o: Outcome| {
        o.conditions("n1")
            .into_iter()
            .map(|s| format!("{} {:?} {} {}", s.kind, s.status, s.reason, s.message))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        text(Outcome::Started),
        ["PinnedImageSetsProgressing True ImagePrefetch node is prefetching images: n1"]
    );
    assert_eq!(
        text(Outcome::Complete),
        [
            "PinnedImageSetsProgressing False AsExpected All pinned image sets complete",
            "PinnedImageSetsDegraded False AsExpected All is good"
        ]
    );
    assert_eq!(
        text(Outcome::Failed("boom".into())),
        [
            "PinnedImageSetsDegraded True PrefetchFailed One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details."
        ]
    );
}

fn cond(kind: &str, status: Status, message: &str) -> Condition {
    Condition {
        kind: kind.into(),
        status,
        reason: "R".into(),
        message: message.into(),
        last_transition_time: "t0".into(),
    }
}

#[test]
fn merging_touches_only_the_pinned_image_conditions() {
    let existing = vec![
        cond(UPDATED, Status::True, "updated"),
        cond(PINNED_IMAGE_SETS_PROGRESSING, Status::False, "x"),
    ];
    let merged = merge_conditions(&existing, &Outcome::Started.conditions("n"), "t1").unwrap();
    assert_eq!(merged[0], existing[0], "Updated stays True");
    assert_eq!(merged[1].status, Status::True);
    assert_eq!(merged[1].last_transition_time, "t1");
    assert_eq!(merged.len(), 2);
    // the same again: nothing to write
    assert_eq!(
        merge_conditions(&merged, &Outcome::Started.conditions("n"), "t2"),
        None
    );
    // a missing condition is added
    let failed =
        merge_conditions(&merged, &Outcome::Failed("e".into()).conditions("n"), "t3").unwrap();
    assert_eq!(failed.len(), 3);
    assert_eq!(failed[2].kind, PINNED_IMAGE_SETS_DEGRADED);
}

#[test]
fn status_entries_per_outcome() {
    let sets = [
        SetState {
            name: "done".into(),
            generation: 2,
            complete: true,
        },
        SetState {
            name: "new".into(),
            generation: 5,
            complete: false,
        },
    ];
    let json = |o: Outcome| serde_json::to_value(entries(&sets, &o)).unwrap();
    assert_eq!(
        json(Outcome::Started),
        serde_json::json!([
            {"name": "done", "desiredGeneration": 2, "currentGeneration": 2},
            {"name": "new", "desiredGeneration": 5},
        ])
    );
    assert_eq!(
        json(Outcome::Complete),
        serde_json::json!([
            {"name": "done", "desiredGeneration": 2, "currentGeneration": 2},
            {"name": "new", "desiredGeneration": 5, "currentGeneration": 5},
        ])
    );
    assert_eq!(
        json(Outcome::Failed("pull failed".into())),
        serde_json::json!([
            {"name": "done", "desiredGeneration": 2, "currentGeneration": 2},
            {"name": "new", "desiredGeneration": 5, "lastFailedGeneration": 5, "lastFailedGenerationError": "pull failed"},
        ])
    );
    let long = "é".repeat(MAX_ERROR_LEN);
    let e = entries(&sets[1..], &Outcome::Failed(long));
    let error = e[0].last_failed_generation_error.as_ref().unwrap();
    assert!(error.len() <= MAX_ERROR_LEN && error.len() >= MAX_ERROR_LEN - 1);
}

#[test]
fn quantities() {
    for (text, bytes) in [
        ("120Gi", Some(120 * 1024 * 1024 * 1024)),
        ("102687672Ki", Some(102_687_672 * 1024)),
        ("96143933831", Some(96_143_933_831)),
        ("1e9", Some(1_000_000_000)),
        ("500M", Some(500_000_000)),
        ("1.5Gi", Some(1_610_612_736)),
        ("1500m", Some(2)),
        ("", None),
        ("12Qi", None),
        ("Gi", None),
    ] {
        assert_eq!(parse_quantity(text), bytes, "{text}");
    }
}
