use super::file_store::{FileStore, State};
use super::*;
use async_trait::async_trait;
use http_body_util::BodyExt;

fn body(id: &str, group: &str) -> Vec<u8> {
    serde_json::to_vec(&Request::new(id, group)).unwrap()
}

fn protocol_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(HEADER, HeaderValue::from_static("true"));
    h
}

async fn call(
    lock: &FleetLock,
    method: Method,
    path: &str,
    headers: &HeaderMap,
    body: Option<&[u8]>,
    peer: &Peer,
) -> (StatusCode, String) {
    let response = lock.answer(&method, path, headers, body, peer, true).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

fn service(dir: &std::path::Path, slots: Slots) -> FleetLock {
    let store = FileStore::open(&dir.join("fleet-lock.json")).unwrap();
    FleetLock::new(Arc::new(store), slots, Arc::new(access::AnyGroup), false)
}

#[tokio::test]
async fn the_protocols_answers() {
    let dir = tempfile::tempdir().unwrap();
    let lock = service(dir.path(), Slots::default());
    let h = protocol_headers();
    let anon = Peer::Anonymous;
    let mut wrong_header = HeaderMap::new();
    wrong_header.insert(HEADER, HeaderValue::from_static("yes"));
    let node_b = Peer::Node("b".to_string());
    let no_headers = HeaderMap::new();
    // (method, path, headers, body, peer, status, kind of the error body or "" for 200)
    type Row<'a> = (
        Method,
        &'a str,
        &'a HeaderMap,
        Option<Vec<u8>>,
        &'a Peer,
        u16,
        &'a str,
    );
    let rows: Vec<Row<'_>> = vec![
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(body("a", "workers")),
            &anon,
            200,
            "",
        ),
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(body("a", "workers")),
            &anon,
            200,
            "",
        ), // recursive
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(body("b", "workers")),
            &anon,
            409,
            kind::SEMAPHORE_FULL,
        ),
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(body("b", "masters")),
            &anon,
            200,
            "",
        ), // another group
        (
            Method::POST,
            STEADY_STATE_PATH,
            &h,
            Some(body("b", "workers")),
            &anon,
            200,
            "",
        ), // not held: fine
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(body("b", "workers")),
            &anon,
            409,
            kind::SEMAPHORE_FULL,
        ), // a still holds it
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &no_headers,
            Some(body("a", "workers")),
            &anon,
            400,
            kind::MISSING_HEADER,
        ),
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &wrong_header,
            Some(body("a", "workers")),
            &anon,
            400,
            kind::MISSING_HEADER,
        ),
        (
            Method::GET,
            PRE_REBOOT_PATH,
            &h,
            Some(Vec::new()),
            &anon,
            405,
            INVALID_METHOD,
        ),
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(b"{}".to_vec()),
            &anon,
            400,
            kind::INVALID_REQUEST,
        ),
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(body("a", "bad group")),
            &anon,
            400,
            kind::INVALID_REQUEST,
        ),
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(body("", "workers")),
            &anon,
            400,
            kind::INVALID_REQUEST,
        ),
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            None,
            &anon,
            413,
            kind::INVALID_REQUEST,
        ),
        // a proven node may only act for itself
        (
            Method::POST,
            STEADY_STATE_PATH,
            &h,
            Some(body("a", "workers")),
            &node_b,
            403,
            kind::INVALID_REQUEST,
        ),
        (
            Method::POST,
            STEADY_STATE_PATH,
            &h,
            Some(body("a", "workers")),
            &anon,
            200,
            "",
        ),
        (
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(body("b", "workers")),
            &node_b,
            200,
            "",
        ),
    ];
    for (i, (method, path, headers, body, peer, status, want_kind)) in rows.into_iter().enumerate()
    {
        let (got, text) = call(&lock, method.clone(), path, headers, body.as_deref(), peer).await;
        assert_eq!(got.as_u16(), status, "row {i}: {method} {path}: {text}");
        if want_kind.is_empty() {
            assert_eq!(text, "", "row {i}");
        } else {
            let e: ErrorBody = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("row {i}: not an error body {text:?}: {e}"));
            assert_eq!(e.kind, want_kind, "row {i}: {text}");
            assert!(!e.value.is_empty(), "row {i}");
        }
    }
    let (_, text) = call(
        &lock,
        Method::POST,
        PRE_REBOOT_PATH,
        &h,
        Some(&body("c", "workers")),
        &anon,
    )
    .await;
    assert!(
        text.contains("its 1 slot(s) are held by other clients"),
        "{text}"
    );
    assert!(!text.contains("by b"), "{text}");
}

/// Groups as a cluster has them: pools `worker` and `master`; node `w0` in `worker`, `m0` in
/// `master`.
struct Pools;

#[async_trait]
impl access::Groups for Pools {
    async fn check(&self, group: &str, node: Option<&str>) -> Result<(), access::GroupRefusal> {
        if !["worker", "master"].contains(&group) {
            return Err(access::GroupRefusal::Unknown(format!("{group:?} unknown")));
        }
        let own = match node {
            None => return Ok(()),
            Some("w0") => "worker",
            Some("m0") => "master",
            Some(other) => return Err(access::GroupRefusal::NotOwn(format!("no Node {other}"))),
        };
        if own == group {
            Ok(())
        } else {
            Err(access::GroupRefusal::NotOwn(format!("{own:?} is its own")))
        }
    }

    fn describe(&self) -> String {
        "test pools".to_string()
    }
}

#[tokio::test]
async fn with_client_authentication_only_proven_nodes_act_and_only_for_their_own_pool() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(&dir.path().join("fleet-lock.json")).unwrap();
    let lock = FleetLock::new(Arc::new(store), Slots::default(), Arc::new(Pools), true);
    let h = protocol_headers();
    let (w0, w1, m0) = (
        Peer::Node("w0".to_string()),
        Peer::Token("w1".to_string()),
        Peer::Node("m0".to_string()),
    );
    let (anon, admin) = (Peer::Anonymous, Peer::NotANode("CN=admin".to_string()));
    let long = "w".repeat(access::MAX_GROUP_BYTES + 1);
    // (path, id, group, peer, over TLS, status, a part of the answer)
    let rows: Vec<(&str, &str, &str, &Peer, bool, u16, &str)> = vec![
        (PRE_REBOOT_PATH, "m0", "master", &m0, true, 200, ""),
        // nobody else may give back or take m0's slot: anonymous, plain HTTP, another cert
        (
            STEADY_STATE_PATH,
            "m0",
            "master",
            &anon,
            true,
            401,
            UNAUTHENTICATED,
        ),
        (
            STEADY_STATE_PATH,
            "m0",
            "master",
            &anon,
            false,
            401,
            "plain HTTP",
        ),
        (
            STEADY_STATE_PATH,
            "m0",
            "master",
            &m0,
            false,
            401,
            "plain HTTP",
        ),
        (
            STEADY_STATE_PATH,
            "m0",
            "master",
            &admin,
            true,
            401,
            "CN=admin",
        ),
        (
            STEADY_STATE_PATH,
            "m0",
            "master",
            &w0,
            true,
            403,
            "proved to be node",
        ),
        (
            PRE_REBOOT_PATH,
            "x",
            "master",
            &anon,
            true,
            401,
            UNAUTHENTICATED,
        ),
        // a worker may not take the masters' group, nor an unknown or a long one
        (
            PRE_REBOOT_PATH,
            "w0",
            "master",
            &w0,
            true,
            403,
            "is its own",
        ),
        (PRE_REBOOT_PATH, "w0", "ghost", &w0, true, 400, "unknown"),
        (PRE_REBOOT_PATH, "w0", &long, &w0, true, 400, "bytes long"),
        (
            PRE_REBOOT_PATH,
            "w1",
            "worker",
            &w1,
            true,
            403,
            "no Node w1",
        ),
        (PRE_REBOOT_PATH, "w0", "worker", &w0, true, 200, ""),
        // giving back one's own slot in a known group is allowed (a node that moved pools)
        (STEADY_STATE_PATH, "w0", "master", &w0, true, 200, ""),
        // m0 still holds master: the refusal does not name it
        (PRE_REBOOT_PATH, "m0", "master", &m0, true, 200, ""),
        (STEADY_STATE_PATH, "m0", "master", &m0, true, 200, ""),
    ];
    for (i, (path, id, group, peer, tls, status, part)) in rows.into_iter().enumerate() {
        let response = lock
            .answer(&Method::POST, path, &h, Some(&body(id, group)), peer, tls)
            .await;
        let got = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        assert_eq!(
            got, status,
            "row {i}: {path} {id} {group:.20} {peer:?}: {text}"
        );
        assert!(text.contains(part), "row {i}: {text}");
    }
}

#[tokio::test]
async fn a_full_group_is_refused_without_naming_its_holders() {
    let dir = tempfile::tempdir().unwrap();
    let h = protocol_headers();
    let open = service(dir.path(), Slots::default());
    for (id, status) in [("m0", 200), ("m1", 409)] {
        let (got, text) = call(
            &open,
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(&body(id, "master")),
            &Peer::Anonymous,
        )
        .await;
        assert_eq!(got.as_u16(), status, "{id}: {text}");
        assert!(!text.contains("m0"), "the refusal names the holder: {text}");
    }
}

#[tokio::test]
async fn holders_survive_a_restart_and_slots_are_per_group() {
    let dir = tempfile::tempdir().unwrap();
    let slots = Slots {
        default: 1,
        per_group: [("workers".to_string(), 2)].into(),
    };
    let h = protocol_headers();
    let anon = Peer::Anonymous;
    {
        let lock = service(dir.path(), slots.clone());
        for id in ["a", "b"] {
            let (s, _) = call(
                &lock,
                Method::POST,
                PRE_REBOOT_PATH,
                &h,
                Some(&body(id, "workers")),
                &anon,
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{id}");
        }
        let (s, _) = call(
            &lock,
            Method::POST,
            PRE_REBOOT_PATH,
            &h,
            Some(&body("m", "masters")),
            &anon,
        )
        .await;
        assert_eq!(s, StatusCode::OK);
    }
    // the companion restarts: the same holders
    let store = FileStore::open(&dir.path().join("fleet-lock.json")).unwrap();
    assert_eq!(
        store.state().await,
        State {
            groups: [
                ("masters".to_string(), vec!["m".to_string()]),
                (
                    "workers".to_string(),
                    vec!["a".to_string(), "b".to_string()]
                ),
            ]
            .into()
        }
    );
    let lock = FleetLock::new(Arc::new(store), slots, Arc::new(access::AnyGroup), false);
    let (s, _) = call(
        &lock,
        Method::POST,
        PRE_REBOOT_PATH,
        &h,
        Some(&body("c", "workers")),
        &anon,
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _) = call(
        &lock,
        Method::POST,
        PRE_REBOOT_PATH,
        &h,
        Some(&body("b", "workers")),
        &anon,
    )
    .await;
    assert_eq!(
        s,
        StatusCode::OK,
        "b re-acquires recursively after the restart"
    );
    let (s, _) = call(
        &lock,
        Method::POST,
        STEADY_STATE_PATH,
        &h,
        Some(&body("a", "workers")),
        &anon,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(
        &lock,
        Method::POST,
        PRE_REBOOT_PATH,
        &h,
        Some(&body("c", "workers")),
        &anon,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn a_state_file_that_cannot_be_written_answers_500_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/fleet-lock.json");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let store = FileStore::open(&path).unwrap();
    std::fs::remove_dir(dir.path().join("sub")).unwrap();
    let lock = FleetLock::new(
        Arc::new(store),
        Slots::default(),
        Arc::new(access::AnyGroup),
        false,
    );
    let h = protocol_headers();
    let (s, text) = call(
        &lock,
        Method::POST,
        PRE_REBOOT_PATH,
        &h,
        Some(&body("a", "w")),
        &Peer::Anonymous,
    )
    .await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{text}");
    assert!(text.contains(kind::BACKEND), "{text}");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    // nothing was taken: another client gets the slot
    let (s, _) = call(
        &lock,
        Method::POST,
        PRE_REBOOT_PATH,
        &h,
        Some(&body("b", "w")),
        &Peer::Anonymous,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
}

#[test]
fn a_broken_state_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet-lock.json");
    std::fs::write(&path, "{not json").unwrap();
    let e = FileStore::open(&path).err().unwrap();
    assert!(
        format!("{e:#}").contains("not a FleetLock state file"),
        "{e:#}"
    );
    let e = FileStore::open(&dir.path().join("missing/fleet-lock.json"))
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
}
