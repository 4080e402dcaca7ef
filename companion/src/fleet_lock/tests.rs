use super::file_store::{FileStore, State};
use super::*;
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
    let response = lock.answer(&method, path, headers, body, peer).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

fn service(dir: &std::path::Path, slots: Slots) -> FleetLock {
    let store = FileStore::open(&dir.join("fleet-lock.json")).unwrap();
    FleetLock::new(Arc::new(store), slots)
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
    assert!(text.contains("its 1 slot(s) are held by b"), "{text}");
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
    let lock = FleetLock::new(Arc::new(store), slots);
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
    let lock = FleetLock::new(Arc::new(store), Slots::default());
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
