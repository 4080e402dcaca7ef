use std::fs;

use machine_config::SpecVersion;

use super::*;

const POOL: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
";

fn mc(name: &str, labels: &str, path: &str, data: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  labels:
    machineconfiguration.openshift.io/role: worker
{labels}spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: {path}
        mode: 420
        contents:
          source: data:,{data}
"
    )
}

fn request(pool: &str, node: Option<&str>) -> PoolRequest {
    PoolRequest {
        pool: pool.into(),
        node: node.map(str::to_string),
        config: None,
        spec: SpecVersion::V3_2,
    }
}

fn served_sources(source: &Standalone, pool: &str, node: Option<&str>) -> Vec<String> {
    let body = source.config(&request(pool, node)).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&body).unwrap();
    config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .take_while(|f| f["path"] != machine_config::mco::paths::NODE_ANNOTATIONS)
        .map(|f| {
            format!(
                "{}={}",
                f["path"].as_str().unwrap(),
                f["contents"]["source"].as_str().unwrap()
            )
        })
        .collect()
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("pool.yaml"), POOL).unwrap();
    fs::write(
        dir.path().join("00-base.yaml"),
        mc("00-base", "", "/etc/base", "base"),
    )
    .unwrap();
    fs::write(
        dir.path().join("10-node-a.yaml"),
        mc(
            "10-node-a",
            "    mco.io/node: node-a\n",
            "/etc/base",
            "node-a",
        ),
    )
    .unwrap();
    dir
}

#[test]
fn serves_pool_and_per_node_configs() {
    let dir = fixture();
    let source = Standalone::open(dir.path(), RenderOptions::default()).unwrap();
    assert_eq!(
        served_sources(&source, "worker", None),
        ["/etc/base=data:,base"]
    );
    assert_eq!(
        served_sources(&source, "worker", Some("node-b")),
        ["/etc/base=data:,base"]
    );
    assert_eq!(
        served_sources(&source, "worker", Some("node-a")),
        ["/etc/base=data:,node-a"]
    );
    assert!(matches!(
        source.config(&request("infra", None)),
        Err(ServeError::NotFound(_))
    ));
    let snapshot = source.snapshot();
    let node = snapshot
        .config_for(&request("worker", Some("node-a")))
        .unwrap();
    assert!(node.name().starts_with("rendered-worker-node-a-"));
}

#[test]
fn reload_picks_up_changes_and_survives_broken_manifests() {
    let dir = fixture();
    let source = Standalone::open(dir.path(), RenderOptions::default()).unwrap();
    let first = source
        .snapshot()
        .config_for(&request("worker", None))
        .unwrap()
        .name()
        .to_string();
    source.config(&request("worker", None)).unwrap();
    assert_eq!(source.cache.len(), 1);

    let mut seen = manifests::fingerprint(dir.path());
    assert!(!source.reload_if_changed(&mut seen), "nothing changed");
    fs::write(
        dir.path().join("20-more.yaml"),
        mc("20-more", "", "/etc/more", "more"),
    )
    .unwrap();
    assert!(source.reload_if_changed(&mut seen));
    let second = source
        .snapshot()
        .config_for(&request("worker", None))
        .unwrap()
        .name()
        .to_string();
    assert_ne!(first, second);
    assert_eq!(source.cache.len(), 0, "the old render left the cache");
    assert_eq!(
        served_sources(&source, "worker", None),
        ["/etc/base=data:,base", "/etc/more=data:,more"]
    );

    fs::write(
        dir.path().join("30-broken.yaml"),
        "kind: MachineConfig\nmetadata: [",
    )
    .unwrap();
    assert!(source.reload_if_changed(&mut seen));
    assert_eq!(
        source
            .snapshot()
            .config_for(&request("worker", None))
            .unwrap()
            .name(),
        second
    );
}

#[test]
fn a_pool_that_cannot_render_answers_500() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("pool.yaml"), POOL).unwrap();
    let source = Standalone::open(dir.path(), RenderOptions::default()).unwrap();
    let err = source.config(&request("worker", None)).unwrap_err();
    assert_eq!(
        err,
        ServeError::Failed("no MachineConfigs found matching selector for pool worker".into())
    );
}

#[tokio::test(flavor = "current_thread")]
async fn watch_reloads_on_change() {
    let dir = fixture();
    let source = Arc::new(Standalone::open(dir.path(), RenderOptions::default()).unwrap());
    let first = source
        .snapshot()
        .config_for(&request("worker", None))
        .unwrap()
        .name()
        .to_string();
    let (stop, shutdown) = watch::channel(false);
    let watcher = tokio::spawn(source.clone().watch(Duration::from_secs(30), shutdown));
    tokio::time::sleep(Duration::from_millis(100)).await;
    fs::write(
        dir.path().join("20-more.yaml"),
        mc("20-more", "", "/etc/more", "more"),
    )
    .unwrap();
    // inotify reacts long before the 30 s poll; bound the wait generously
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = source
            .snapshot()
            .config_for(&request("worker", None))
            .unwrap()
            .name()
            .to_string();
        if now != first {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reload after a file was added"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(true).unwrap();
    watcher.await.unwrap();
}
