use machine_config::mco::annotations::{CURRENT_CONFIG, LAST_APPLIED_DRAIN};
use machine_config::mco::node_conditions::{Status, UPDATE_PREPARED, UPDATED};

use super::*;
use crate::cluster::FakeNodeApi;

fn condition(object: &Value, kind: &str) -> (Status, String) {
    let c = conditions(object)
        .into_iter()
        .find(|c| c.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} in {object}"));
    (c.status, c.message)
}

#[tokio::test]
async fn created_owned_by_the_node_then_kept() {
    let api = FakeNodeApi::new("worker-0");
    api.set_annotations(&[(CURRENT_CONFIG, Some("rendered-a"))])
        .await
        .unwrap();
    api.set_desired("rendered-b");
    report(&api, "worker", &Progress::NeedsUpdate)
        .await
        .unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert_eq!(o["metadata"]["name"], "worker-0");
    assert_eq!(
        o["metadata"]["ownerReferences"][0],
        json!({"apiVersion": "v1", "kind": "Node", "name": "worker-0", "uid": "uid-worker-0"})
    );
    assert_eq!(o["spec"], spec("worker-0", "worker", "rendered-b"));
    assert_eq!(
        o["status"]["configVersion"],
        json!({"desired": "rendered-b", "current": "rendered-a"})
    );
    assert_eq!(o["status"]["observedGeneration"], 1);
    assert_eq!(
        condition(&o, UPDATED),
        (Status::False, "Node worker-0 needs an update".into())
    );
    // Created, then its status written through the subresource.
    let writes: Vec<bool> = api
        .machine_config_node_writes()
        .iter()
        .map(|w| w.0)
        .collect();
    assert_eq!(writes, [false, true]);

    // The same step again writes nothing.
    report(&api, "worker", &Progress::NeedsUpdate)
        .await
        .unwrap();
    assert_eq!(api.machine_config_node_writes().len(), 2);

    // A new desiredConfig moves the spec (and the generation) before the status.
    api.set_desired("rendered-c");
    let prepared = Progress::Prepared { drain: true };
    report(&api, "worker", &prepared).await.unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert_eq!(o["spec"]["configVersion"]["desired"], "rendered-c");
    assert_eq!(o["metadata"]["generation"], 2);
    assert_eq!(o["status"]["observedGeneration"], 2);
    assert_eq!(o["status"]["configVersion"]["desired"], "rendered-c");
    assert_eq!(condition(&o, UPDATE_PREPARED).0, Status::True);
}

#[tokio::test]
async fn messages_use_the_node_annotations() {
    let api = FakeNodeApi::new("worker-1");
    api.set_annotations(&[(LAST_APPLIED_DRAIN, Some("uncordon-rendered-a"))])
        .await
        .unwrap();
    report(
        &api,
        "infra",
        &Progress::Draining {
            config: "rendered-b".into(),
        },
    )
    .await
    .unwrap();
    let o = api.machine_config_node_object().unwrap();
    // No desiredConfig yet: the placeholder the MCO uses.
    assert_eq!(o["spec"]["configVersion"]["desired"], NOT_YET_SET);
    assert_eq!(o["spec"]["pool"]["name"], "infra");
    let drained = conditions(&o)
        .into_iter()
        .find(|c| c.kind == "Drained")
        .unwrap();
    assert!(
        drained.message.ends_with(
            "desired drainer drain-rendered-b matches current drainer uncordon-rendered-a"
        ),
        "{}",
        drained.message
    );
    assert_eq!(
        o["status"].get("configVersion").unwrap()["desired"],
        NOT_YET_SET
    );
}

#[tokio::test]
async fn a_refused_write_is_returned_and_the_next_step_heals() {
    let api = FakeNodeApi::new("worker-2");
    api.set_desired("rendered-b");
    api.fail_machine_config_node_writes(Some("forbidden"));
    let err = report(&api, "worker", &Progress::NeedsUpdate)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("forbidden"), "{err}");
    assert!(api.machine_config_node_object().is_none());
    api.fail_machine_config_node_writes(None);
    report(&api, "worker", &Progress::Updated).await.unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert_eq!(condition(&o, UPDATED).0, Status::True);
}

/// With `ImageModeStatusReporting`: `spec`/`status.configImage` follow the image annotations
/// (removed when the pool leaves image mode), a pull is reported, files and OS are separate
/// conditions, and `Updated` names the image the update went to. Without it, none of that.
#[tokio::test]
async fn image_mode_status_reporting_follows_the_images() {
    use machine_config::mco::annotations::{CURRENT_IMAGE, DESIRED_IMAGE};
    use machine_config::mco::node_conditions::{
        APPLIED_FILES_AND_OS, APPLIED_OS_IMAGE, IMAGE_PULLED_FROM_REGISTRY,
    };
    const OLD: &str = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const IMG: &str = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";
    let gates = Gates {
        image_mode_status_reporting: true,
    };
    let pulled = Progress::ImagePulled { image: IMG.into() };

    // Without the gate: a pull writes nothing, and no configImage anywhere.
    let plain = FakeNodeApi::new("worker-0");
    plain.set_desired("rendered-b");
    plain
        .set_annotations(&[(DESIRED_IMAGE, Some(IMG)), (CURRENT_IMAGE, Some(OLD))])
        .await
        .unwrap();
    report(&plain, "worker", &pulled).await.unwrap();
    assert!(plain.machine_config_node_object().is_none());
    report(&plain, "worker", &Progress::NeedsUpdate)
        .await
        .unwrap();
    let o = plain.machine_config_node_object().unwrap();
    assert!(o["spec"].get("configImage").is_none() && o["status"].get("configImage").is_none());
    assert!(
        conditions(&o)
            .iter()
            .any(|c| c.kind == APPLIED_FILES_AND_OS)
    );

    // With the gate.
    let api = FakeNodeApi::new("worker-0");
    api.set_desired("rendered-b");
    api.set_annotations(&[
        (CURRENT_CONFIG, Some("rendered-b")),
        (DESIRED_IMAGE, Some(IMG)),
        (CURRENT_IMAGE, Some(OLD)),
    ])
    .await
    .unwrap();
    report_with(
        &api,
        "worker",
        &Progress::PullingImage { image: IMG.into() },
        gates,
    )
    .await
    .unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert_eq!(o["spec"]["configImage"], json!({"desiredImage": IMG}));
    assert_eq!(
        o["status"]["configImage"],
        json!({"currentImage": OLD, "desiredImage": IMG})
    );
    assert_eq!(
        condition(&o, IMAGE_PULLED_FROM_REGISTRY),
        (
            Status::Unknown,
            format!("Pulling OS image {IMG} from registry")
        )
    );
    assert!(
        !conditions(&o)
            .iter()
            .any(|c| c.kind == APPLIED_FILES_AND_OS)
    );
    report_with(&api, "worker", &pulled, gates).await.unwrap();
    let applied = Progress::AppliedFilesAndOs {
        os: true,
        files: false,
    };
    report_with(&api, "worker", &applied, gates).await.unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert_eq!(condition(&o, IMAGE_PULLED_FROM_REGISTRY).0, Status::True);
    assert_eq!(
        condition(&o, APPLIED_OS_IMAGE),
        (Status::True, "Applied new OS config to node.".into())
    );

    // Done in the image: Updated names it in what it resets.
    api.set_annotations(&[(CURRENT_IMAGE, Some(IMG))])
        .await
        .unwrap();
    report_with(&api, "worker", &Progress::Updated, gates)
        .await
        .unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert_eq!(
        o["status"]["configImage"],
        json!({"currentImage": IMG, "desiredImage": IMG})
    );
    assert_eq!(
        condition(&o, APPLIED_OS_IMAGE),
        (
            Status::False,
            format!("Action during update to {IMG}: Applied new OS config to node.")
        )
    );

    // The pool leaves image mode: the images go from spec and status.
    api.set_annotations(&[(CURRENT_IMAGE, None), (DESIRED_IMAGE, None)])
        .await
        .unwrap();
    report_with(&api, "worker", &Progress::NeedsUpdate, gates)
        .await
        .unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert!(
        o["spec"]["configImage"].get("desiredImage").is_none(),
        "{o:#}"
    );
    assert!(o["status"].get("configImage").is_none(), "{o:#}");
}

/// The irreconcilable report needs the object, is written once, and is removed when the
/// differences go.
#[tokio::test]
async fn irreconcilable_changes_are_set_and_cleared() {
    let api = FakeNodeApi::new("worker-0");
    let changes = vec![IrreconcilableChange {
        field_path: "spec.config.storage.disks[0].device".into(),
        diff: "- \"/dev/sda\"\n+ \"/dev/sdb\"".into(),
    }];
    let missing = report_irreconcilable(&api, &changes).await.unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("MCN for worker-0 node does not exist"),
        "{missing}"
    );
    api.set_desired("rendered-a");
    report(&api, "worker", &Progress::NeedsUpdate)
        .await
        .unwrap();
    let before = api.machine_config_node_writes().len();
    report_irreconcilable(&api, &changes).await.unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert_eq!(
        o["status"]["irreconcilableChanges"],
        json!([{"fieldPath": "spec.config.storage.disks[0].device",
                "diff": "- \"/dev/sda\"\n+ \"/dev/sdb\""}])
    );
    // the same report writes nothing; none removes the field
    report_irreconcilable(&api, &changes).await.unwrap();
    assert_eq!(api.machine_config_node_writes().len(), before + 1);
    report_irreconcilable(&api, &[]).await.unwrap();
    let o = api.machine_config_node_object().unwrap();
    assert!(o["status"].get("irreconcilableChanges").is_none(), "{o}");
    assert!(o["status"].get("conditions").is_some(), "{o}");
}
