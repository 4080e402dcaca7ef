use super::*;
use SpecVersion::*;

/// Every case of the MCS's version negotiation (`detectSpecVersionFromAcceptHeader`: no, invalid
/// or non-Ignition header ⇒ 2.2.0; 2.x ⇒ 2.2.0; 3.y beyond 3.5 ⇒ 3.5.0; an unknown major is
/// refused; media ranges are tried by descending q and the first Ignition one with a valid
/// version wins), plus the MCS's own test headers.
#[test]
fn negotiation_table() {
    let ign = "application/vnd.coreos.ignition+json";
    let rows: Vec<(&str, Option<String>, Result<SpecVersion, ()>)> = vec![
        // no / invalid / non-Ignition header ⇒ 2.2.0
        ("absent", None, Ok(V2_2)),
        ("empty", Some(String::new()), Ok(V2_2)),
        (
            "not a media type",
            Some("an-invalid-accept-header".into()),
            Ok(V2_2),
        ),
        ("text/plain", Some("text/plain".into()), Ok(V2_2)),
        ("*/* only", Some("*/*".into()), Ok(V2_2)),
        ("Ignition without version", Some(ign.into()), Ok(V2_2)),
        (
            "invalid version ignored",
            Some(format!("{ign};version=3")),
            Ok(V2_2),
        ),
        (
            "quoted version is not semver",
            Some(format!("{ign};version=\"3.2.0\"")),
            Ok(V2_2),
        ),
        (
            "version on another subtype",
            Some("application/json;version=3.2.0".into()),
            Ok(V2_2),
        ),
        // what Ignition 2.x sends, for every supported minor
        (
            "3.0.0",
            Some(format!("{ign};version=3.0.0, */*;q=0.1")),
            Ok(V3_0),
        ),
        (
            "3.1.0",
            Some(format!("{ign};version=3.1.0, */*;q=0.1")),
            Ok(V3_1),
        ),
        (
            "3.2.0",
            Some(format!("{ign};version=3.2.0, */*;q=0.1")),
            Ok(V3_2),
        ),
        (
            "3.3.0",
            Some(format!("{ign};version=3.3.0, */*;q=0.1")),
            Ok(V3_3),
        ),
        (
            "3.4.0",
            Some(format!("{ign};version=3.4.0, */*;q=0.1")),
            Ok(V3_4),
        ),
        (
            "3.5.0",
            Some(format!("{ign};version=3.5.0, */*;q=0.1")),
            Ok(V3_5),
        ),
        (
            "patch ignored",
            Some(format!("{ign};version=3.2.7")),
            Ok(V3_2),
        ),
        (
            "pre-release of a known minor",
            Some(format!("{ign};version=3.4.0-experimental")),
            Ok(V3_4),
        ),
        (
            "build metadata",
            Some(format!("{ign};version=3.1.0+abc")),
            Ok(V3_1),
        ),
        (
            "leading zeros as Go",
            Some(format!("{ign};version=03.01.00")),
            Ok(V3_1),
        ),
        // newer minor of a known major ⇒ newest minor
        (
            "3.6.0",
            Some(format!("{ign};version=3.6.0, */*;q=0.1")),
            Ok(V3_5),
        ),
        (
            "3.99.0",
            Some(format!("{ign};version=3.99.0, */*;q=0.1")),
            Ok(V3_5),
        ),
        // 2.x ≥ 2.2 ⇒ 2.2.0 (Ignition 0.x sends 2.4.0 first, then version=1 with q=0.5)
        (
            "Ignition 0.x",
            Some(format!(
                "{ign}; version=2.4.0, {ign}; version=1; q=0.5, */*; q=0.1"
            )),
            Ok(V2_2),
        ),
        ("2.2.0", Some(format!("{ign};version=2.2.0")), Ok(V2_2)),
        ("2.3.0", Some(format!("{ign};version=2.3.0")), Ok(V2_2)),
        // unknown major, or a 2.x below 2.2 ⇒ 400
        (
            "4.0.0",
            Some(format!("{ign};version=4.0.0, */*;q=0.1")),
            Err(()),
        ),
        ("1.0.0", Some(format!("{ign};version=1.0.0")), Err(())),
        ("2.1.0", Some(format!("{ign};version=2.1.0")), Err(())),
        ("0.1.0", Some(format!("{ign};version=0.1.0")), Err(())),
        // q-values order the ranges; ties keep header order
        (
            "higher q wins",
            Some(format!(
                "{ign};version=3.1.0;q=0.5, {ign};version=3.4.0;q=0.9"
            )),
            Ok(V3_4),
        ),
        (
            "default q is 1",
            Some(format!("{ign};version=3.1.0;q=0.5, {ign};version=3.3.0")),
            Ok(V3_3),
        ),
        (
            "tie keeps order",
            Some(format!(
                "{ign};version=3.2.0;q=0.5, {ign};version=3.3.0;q=0.5"
            )),
            Ok(V3_2),
        ),
        (
            "invalid q counts as 1",
            Some(format!(
                "{ign};version=3.1.0;q=0.9, {ign};version=3.3.0;q=high"
            )),
            Ok(V3_3),
        ),
        (
            "a bad range with high q decides the error",
            Some(format!(
                "{ign};version=9.0.0;q=1, {ign};version=3.3.0;q=0.8"
            )),
            Err(()),
        ),
        (
            "versionless Ignition range is skipped",
            Some(format!("{ign}, {ign};version=3.2.0;q=0.2")),
            Ok(V3_2),
        ),
        (
            "first valid version parameter",
            Some(format!("{ign};version=bad;version=3.3.0")),
            Ok(V3_3),
        ),
        (
            "spaces around parts",
            Some(format!("  {ign} ;  version=3.1.0 ")),
            Ok(V3_1),
        ),
        (
            "key with spaces is not version",
            Some(format!("{ign};version = 3.1.0")),
            Ok(V2_2),
        ),
    ];
    for (name, header, expected) in rows {
        let got = negotiate(header.as_deref());
        match expected {
            Ok(spec) => assert_eq!(got, Ok(spec), "{name}: {header:?}"),
            Err(()) => {
                let err = got.expect_err(name);
                assert_eq!(err.header, header.clone().unwrap_or_default());
                assert!(
                    err.to_string()
                        .starts_with("unsupported Ignition version in Accept header: ")
                );
            }
        }
    }
}

#[test]
fn parse_accept_keeps_mcs_shape() {
    let ranges = parse_accept(
        "application/vnd.coreos.ignition+json; version=2.4.0, application/vnd.coreos.ignition+json; version=1; q=0.5, */*; q=0.1",
    );
    let summary: Vec<(String, String, Option<i64>, f32)> = ranges
        .iter()
        .map(|r| {
            (
                r.media_type.clone(),
                r.subtype.clone(),
                r.version.as_ref().map(|v| v.major),
                r.q,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "application".into(),
                "vnd.coreos.ignition+json".into(),
                Some(2),
                1.0
            ),
            (
                "application".into(),
                "vnd.coreos.ignition+json".into(),
                None,
                0.5
            ),
            ("*".into(), "*".into(), None, 0.1),
        ]
    );
    assert!(parse_accept("garbage, ;;, =").is_empty());
}

#[test]
fn go_semver_rules() {
    let ok = |s: &str| GoSemver::parse(s).map(|v| (v.major, v.minor, v.patch, v.pre_release));
    assert_eq!(
        ok("3.4.0-experimental"),
        Some((3, 4, 0, "experimental".into()))
    );
    assert_eq!(ok("+3.1.0"), None, "the + starts build metadata");
    assert_eq!(ok("3.1"), None);
    assert_eq!(ok("3.1.x"), None);
    assert_eq!(ok("3.1.0-"), Some((3, 1, 0, String::new())));
    assert_eq!(ok("3.1.0-a..b"), None);
    assert_eq!(ok("3.1.0+"), Some((3, 1, 0, String::new())));
    assert_eq!(ok("3.1.0.1"), None);
    assert_eq!(ok("v3.1.0"), None);
}
