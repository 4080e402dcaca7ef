use super::*;
use http::HeaderValue;
use std::os::unix::fs::PermissionsExt as _;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn dir_with(files: &[(&str, &str, u32)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, mode) in files {
        let path = dir.path().join(name);
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(*mode)).unwrap();
    }
    dir
}

#[test]
fn a_token_file_is_checked_for_owner_length_shape_and_match() {
    let long = "x".repeat(5000);
    let dir = dir_with(&[
        ("worker-0", &format!("{TOKEN}\n"), 0o600),
        ("readable", &format!("{TOKEN}\n"), 0o644),
        ("short", "0123456789\n", 0o600),
        ("two-lines", &format!("{TOKEN}\n{TOKEN}\n"), 0o600),
        ("huge", &long, 0o600),
    ]);
    fs::create_dir(dir.path().join("a-dir")).unwrap();
    let tokens = BootstrapTokens::open(dir.path(), None).unwrap();
    let now = SystemTime::now();
    let rows: &[(&str, &str, Result<(), &str>)] = &[
        ("worker-0", TOKEN, Ok(())),
        (
            "worker-0",
            "0123456789abcdef0123456789abcdeX",
            Err("does not match"),
        ),
        ("worker-0", "", Err("does not match")),
        ("worker-1", TOKEN, Err("no token file")),
        ("readable", TOKEN, Err("accessible to others")),
        ("short", "0123456789", Err("at least 32 bytes")),
        ("two-lines", TOKEN, Err("one line")),
        ("huge", TOKEN, Err("longer than 4096 bytes")),
        ("a-dir", TOKEN, Err("not a regular file")),
        ("../worker-0", TOKEN, Err("not a node name")),
        (".hidden", TOKEN, Err("not a node name")),
    ];
    for (node, token, want) in rows {
        let got = tokens.check(node, token, now);
        match (want, &got) {
            (Ok(()), Ok(())) => {}
            (Err(part), Err(why)) => {
                assert!(why.contains(part), "{node}: {why:?} lacks {part:?}");
                assert!(!why.contains(TOKEN), "{node}: the error shows the token");
            }
            _ => panic!("{node} with {token:?}: {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn a_token_expires_its_lifetime_after_its_file_was_written() {
    let dir = dir_with(&[("worker-0", TOKEN, 0o600)]);
    let hour = Duration::from_secs(3600);
    let written = SystemTime::now() - 2 * hour;
    fs::File::options()
        .write(true)
        .open(dir.path().join("worker-0"))
        .unwrap()
        .set_modified(written)
        .unwrap();
    let now = SystemTime::now();
    let day = BootstrapTokens::open(dir.path(), Some(24 * hour)).unwrap();
    assert_eq!(day.check("worker-0", TOKEN, now), Ok(()));
    let one_hour = BootstrapTokens::open(dir.path(), Some(hour)).unwrap();
    let why = one_hour.check("worker-0", TOKEN, now).unwrap_err();
    assert!(why.contains("expired"), "{why}");
    let forever = BootstrapTokens::open(dir.path(), None).unwrap();
    assert_eq!(forever.check("worker-0", TOKEN, now), Ok(()));
}

#[test]
fn the_directory_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let err = BootstrapTokens::open(&dir.path().join("missing"), None).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    let file = dir.path().join("file");
    fs::write(&file, "").unwrap();
    let err = BootstrapTokens::open(&file, None).unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[test]
fn a_request_is_authenticated_by_its_bearer_token_and_claimed_node() {
    let dir = dir_with(&[("worker-0", TOKEN, 0o600)]);
    let tokens = BootstrapTokens::open(dir.path(), None).unwrap();
    let bearer = format!("Bearer {TOKEN}");
    let uri: Uri = "/config/worker".parse().unwrap();
    let with_query: Uri = "/config/worker?node=worker-0".parse().unwrap();
    let headers = |pairs: &[(&'static str, &str)]| {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    };
    let anon = Peer::Anonymous;
    let cert = Peer::Node("worker-0".into());
    type Row<'a> = (
        &'a str,
        Option<&'a BootstrapTokens>,
        bool,
        &'a Peer,
        &'a Uri,
        HeaderMap,
        Result<Option<&'a str>, &'a str>,
    );
    let rows: Vec<Row> = vec![
        (
            "no credentials",
            Some(&tokens),
            true,
            &anon,
            &uri,
            headers(&[]),
            Ok(None),
        ),
        (
            "tokens not configured: ignored, as the MCS",
            None,
            true,
            &anon,
            &uri,
            headers(&[("authorization", &bearer), ("x-mco-node", "worker-0")]),
            Ok(None),
        ),
        (
            "a certificate already proved the node",
            Some(&tokens),
            true,
            &cert,
            &uri,
            headers(&[("authorization", "Bearer wrong")]),
            Ok(None),
        ),
        (
            "token and node header",
            Some(&tokens),
            true,
            &anon,
            &uri,
            headers(&[("authorization", &bearer), ("x-mco-node", "worker-0")]),
            Ok(Some("worker-0")),
        ),
        (
            "token and node query, lower-case scheme",
            Some(&tokens),
            true,
            &anon,
            &with_query,
            headers(&[("authorization", &format!("bearer {TOKEN}"))]),
            Ok(Some("worker-0")),
        ),
        (
            "plain HTTP",
            Some(&tokens),
            false,
            &anon,
            &uri,
            headers(&[("authorization", &bearer), ("x-mco-node", "worker-0")]),
            Err("only over HTTPS"),
        ),
        (
            "basic auth",
            Some(&tokens),
            true,
            &anon,
            &uri,
            headers(&[
                ("authorization", "Basic dXNlcjpwYXNz"),
                ("x-mco-node", "worker-0"),
            ]),
            Err("not \"Bearer <token>\""),
        ),
        (
            "no node named",
            Some(&tokens),
            true,
            &anon,
            &uri,
            headers(&[("authorization", &bearer)]),
            Err("needs the node"),
        ),
        (
            "another node's name",
            Some(&tokens),
            true,
            &anon,
            &uri,
            headers(&[("authorization", &bearer), ("x-mco-node", "worker-1")]),
            Err("for node \"worker-1\" is refused"),
        ),
        (
            "a wrong token",
            Some(&tokens),
            true,
            &anon,
            &uri,
            headers(&[
                ("authorization", "Bearer 0123456789abcdef0123456789abcdeX"),
                ("x-mco-node", "worker-0"),
            ]),
            Err("for node \"worker-0\" is refused"),
        ),
    ];
    for (what, tokens, tls, peer, uri, headers, want) in rows {
        let got = BootstrapTokens::authenticate(tokens, tls, peer, uri, &headers);
        match (want, &got) {
            (Ok(None), Authenticated::Connection) => {}
            (Ok(Some(node)), Authenticated::Token(got)) if got == node => {}
            (Err(part), Authenticated::Refused(why)) => {
                assert!(why.contains(part), "{what}: {why:?} lacks {part:?}");
                assert!(!why.contains(TOKEN), "{what}: the refusal shows the token");
            }
            _ => panic!("{what}: {got:?}, want {want:?}"),
        }
    }
}
