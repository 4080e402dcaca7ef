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

/// The expiry is the token's, not its file's: a file rewritten now (as a Secret volume rewrites
/// every key when one changes) does not renew an old token, and a file written long ago does
/// not expire a token that is still valid.
#[test]
fn a_token_expires_when_it_says_whatever_its_file_mtime() {
    let hour = Duration::from_secs(3600);
    let now = SystemTime::now();
    let valid = mint(now + 2 * hour);
    let expired = mint(now - hour);
    let too_far = mint(now + 48 * hour);
    let dir = dir_with(&[
        ("valid", &format!("{valid}\n"), 0o600),
        ("expired", &format!("{expired}\n"), 0o600),
        ("too-far", &format!("{too_far}\n"), 0o600),
        ("legacy", TOKEN, 0o600),
        (
            "malformed",
            "mco1.soon.0123456789abcdef0123456789abcdef",
            0o600,
        ),
        (
            "short-secret",
            "mco1.99999999999.0123456789abcdefghij",
            0o600,
        ),
    ]);
    // The valid token's file is old: it does not matter.
    fs::File::options()
        .write(true)
        .open(dir.path().join("valid"))
        .unwrap()
        .set_modified(now - 1000 * hour)
        .unwrap();
    let day = BootstrapTokens::open(dir.path(), Some(24 * hour)).unwrap();
    let rows: &[(&str, &str, Result<(), &str>)] = &[
        ("valid", &valid, Ok(())),
        ("expired", &expired, Err("expired at")),
        (
            "too-far",
            &too_far,
            Err("further ahead than the tokens' lifetime of 1day"),
        ),
        ("legacy", TOKEN, Err("carries no expiry")),
        (
            "malformed",
            "mco1.soon.0123456789abcdef0123456789abcdef",
            Err("is not mco1.<expiry"),
        ),
        (
            "short-secret",
            "mco1.99999999999.0123456789abcdefghij",
            Err("is not mco1.<expiry"),
        ),
    ];
    for (node, token, want) in rows {
        let got = day.check(node, token, now);
        match (want, &got) {
            (Ok(()), Ok(())) => {}
            (Err(part), Err(why)) => {
                assert!(why.contains(part), "{node}: {why:?} lacks {part:?}");
                assert!(!why.contains(*token), "{node}: the error shows the token");
            }
            _ => panic!("{node}: {got:?}, want {want:?}"),
        }
    }
    // The expired token's file written just now still holds an expired token.
    fs::write(dir.path().join("expired"), format!("{expired}\n")).unwrap();
    assert!(day.check("expired", &expired, now).is_err());
    // Without a lifetime, a token without an expiry never expires; one with an expiry does.
    let forever = BootstrapTokens::open(dir.path(), None).unwrap();
    assert_eq!(forever.check("legacy", TOKEN, now), Ok(()));
    assert_eq!(forever.check("too-far", &too_far, now), Ok(()));
    assert!(forever.check("expired", &expired, now).is_err());
}

#[test]
fn minted_tokens_differ_and_carry_their_expiry() {
    let expires = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
    let (a, b) = (mint(expires), mint(expires));
    assert_ne!(a, b);
    assert!(a.starts_with("mco1.1900000000."), "{a}");
    assert_eq!(a.len(), "mco1.1900000000.".len() + 32);
    assert_eq!(expiry_of(&a), Ok(Some(expires)));
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
