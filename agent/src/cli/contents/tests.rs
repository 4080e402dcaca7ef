use super::*;

#[test]
fn secret_rules() {
    // (path, modes, the reason, or None when the contents may be shown)
    let rows: &[(&str, &[u32], Option<&str>)] = &[
        ("/etc/foo.conf", &[0o644, 0o644], None),
        ("/etc/foo.conf", &[0o644, 0o755], None),
        (
            "/etc/foo.conf",
            &[0o600, 0o644],
            Some("mode 0600, not world-readable"),
        ),
        (
            "/etc/foo.conf",
            &[0o644, 0o640],
            Some("mode 0640, not world-readable"),
        ),
        (
            "/etc/foo.conf",
            &[0o000],
            Some("mode 0000, not world-readable"),
        ),
        (
            "/etc/kubernetes/kubelet.conf",
            &[0o644, 0o644],
            Some("under /etc/kubernetes (cluster credentials)"),
        ),
        (
            "/etc//kubernetes/./x",
            &[0o644],
            Some("under /etc/kubernetes (cluster credentials)"),
        ),
        (
            "/etc/foo/../kubernetes/x",
            &[0o644],
            Some("under /etc/kubernetes (cluster credentials)"),
        ),
        // a sibling whose name only starts the same
        ("/etc/kubernetes-extra/x", &[0o644], None),
        (
            "/var/lib/kubelet/config.json",
            &[0o644],
            Some("under /var/lib/kubelet (the kubelet's credentials and pull secret)"),
        ),
        (
            "/etc/pki/ca-trust/source/anchors/ca.crt",
            &[0o644],
            Some("under /etc/pki (keys and certificates)"),
        ),
        (
            "/etc/ssh/ssh_host_ed25519_key",
            &[0o644],
            Some("an SSH key"),
        ),
        (
            "/etc/ssh/ssh_host_ed25519_key.pub",
            &[0o644],
            Some("an SSH key"),
        ),
        ("/etc/ssh/sshd_config.d/10-x.conf", &[0o644], None),
        (
            "/root/.ssh/authorized_keys",
            &[0o644],
            Some("under .ssh (SSH keys)"),
        ),
        (
            "/home/core/.ssh/authorized_keys.d/ignition",
            &[0o644],
            Some("under .ssh (SSH keys)"),
        ),
        (
            "/var/home/core/.ssh/authorized_keys",
            &[0o644],
            Some("under .ssh (SSH keys)"),
        ),
        ("/opt/tls/server.key", &[0o644], Some("a key (*.key)")),
        ("/opt/tls/server.pem", &[0o644], Some("a PEM file (*.pem)")),
        ("/etc/containers/auth.json", &[0o644], Some("a pull secret")),
        (
            "/etc/mco/internal-registry-pull-secret.json",
            &[0o644],
            Some("a pull secret"),
        ),
        ("/root/.docker/config.json", &[0o644], Some("a pull secret")),
        ("/etc/containers/policy.json", &[0o644], None),
        ("/etc/shadow", &[0o644], Some("password hashes")),
        ("/etc/gshadow", &[0o644], Some("password hashes")),
        ("/etc/passwd", &[0o644], Some("password hashes")),
        ("/etc/chrony.conf", &[0o644], None),
    ];
    for (path, modes, want) in rows {
        assert_eq!(
            secret_reason(path, modes).as_deref(),
            *want,
            "{path} {modes:?}"
        );
    }
}

const OLD: &str = "a\nb\nc\nd\ne\nf\ng\nh\n";

/// (path, old, old mode, new, new mode, the lines wanted)
type Row<'a> = (&'a str, &'a [u8], u32, &'a [u8], u32, Vec<String>);

#[test]
fn how_contents_are_shown() {
    let many_old: String = (0..300).map(|i| format!("{i}\n")).collect();
    let many_new: String = (0..300).map(|i| format!("{i}x\n")).collect();
    let big = vec![b'a'; MAX_DIFF_BYTES as usize + 1];
    let sides = Sides::VALIDATE;
    let rows: &[Row<'_>] = &[
        (
            "/etc/x",
            OLD.as_bytes(),
            0o644,
            b"a\nb\nc\nd\nE\nf\ng\nh\n",
            0o644,
            [
                "--- expected /etc/x",
                "+++ on disk /etc/x",
                "@@ -2,7 +2,7 @@",
                " b",
                " c",
                " d",
                "-e",
                "+E",
                " f",
                " g",
                " h",
            ]
            .map(|l| format!("  {l}"))
            .to_vec(),
        ),
        (
            "/etc/x",
            b"a",
            0o644,
            b"b\r\n\x1b[2J",
            0o644,
            [
                "--- expected /etc/x",
                "+++ on disk /etc/x",
                "@@ -1 +1,2 @@",
                "-a",
                "\\ No newline at end of file",
                "+b\\r",
                "+\\u{1b}[2J",
                "\\ No newline at end of file",
            ]
            .map(|l| format!("  {l}"))
            .to_vec(),
        ),
        (
            "/etc/x",
            b"same\n",
            0o644,
            b"same\n",
            0o755,
            vec!["  same contents (5 bytes)".to_string()],
        ),
        (
            "/etc/x",
            b"password\n",
            0o600,
            b"other\n",
            0o600,
            vec![
                "  contents not shown (secret: mode 0600, not world-readable; 9 bytes expected, 6 on disk)"
                    .to_string(),
            ],
        ),
        (
            "/etc/kubernetes/kubeconfig",
            b"token: abc\n",
            0o644,
            b"token: def\n",
            0o644,
            vec![
                "  contents not shown (secret: under /etc/kubernetes (cluster credentials); 11 bytes expected, 11 on disk)"
                    .to_string(),
            ],
        ),
        (
            "/etc/x",
            b"\xff\xfe\x00",
            0o644,
            b"\x00",
            0o644,
            vec!["  binary contents differ (3 bytes expected, 1 on disk)".to_string()],
        ),
        (
            "/etc/x",
            b"user:x:1000\n",
            0o644,
            b"user:$6$saltsalt$0123456789abcdef:1000\n",
            0o644,
            vec![
                "  contents not shown (secret: holds a password hash; 12 bytes expected, 39 on disk)"
                    .to_string(),
            ],
        ),
        (
            "/etc/x",
            b"[auth]\n",
            0o644,
            b"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
            0o644,
            vec![
                "  contents not shown (secret: holds a private key; 7 bytes expected, 67 on disk)"
                    .to_string(),
            ],
        ),
        (
            "/etc/x",
            &big,
            0o644,
            b"a",
            0o644,
            vec![format!(
                "  contents not shown: too large to diff ({} bytes expected, 1 on disk; at most 4 MiB are)",
                big.len()
            )],
        ),
    ];
    for (path, old, old_mode, new, new_mode, want) in rows {
        let got = show(
            path,
            &sides,
            Version::whole(old, *old_mode),
            Version::whole(new, *new_mode),
        );
        assert_eq!(&got, want, "{path} {old:?} {new:?}");
    }

    // a long diff: the header, 200 lines, and how many were left out
    let got = show(
        "/etc/many",
        &Sides {
            old: "rendered-a",
            new: "rendered-b",
            preposition: "in ",
        },
        Version::whole(many_old.as_bytes(), 0o644),
        Version::whole(many_new.as_bytes(), 0o644),
    );
    assert_eq!(got.len(), 2 + MAX_DIFF_LINES + 1, "{got:#?}");
    assert_eq!(got[0], "  --- rendered-a /etc/many");
    assert_eq!(got[1], "  +++ rendered-b /etc/many");
    assert_eq!(got[2], "  @@ -1,300 +1,300 @@");
    // one hunk of 600 changed lines, 200 of them shown
    assert_eq!(
        got.last().unwrap(),
        "  ... 401 more lines of this diff not shown"
    );
}

#[test]
fn sizes_and_hash_lines() {
    let diff_sides = Sides {
        old: "rendered-a",
        new: "rendered-b",
        preposition: "in ",
    };
    assert_eq!(
        diff_sides.sizes(1, 2),
        "1 byte in rendered-a, 2 in rendered-b"
    );
    assert_eq!(Sides::VALIDATE.sizes(7, 8), "7 bytes expected, 8 on disk");

    let public = Digest::of(b"hello\n", 0o644);
    assert_eq!(
        public.sha256.as_deref(),
        Some("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
    );
    let other = Digest::of(b"hello", 0o644);
    let private = Digest::of(b"secret\n", 0o600);
    assert_eq!(private.sha256, None);
    let rows = [
        (
            &Sides::VALIDATE,
            &public,
            &other,
            "  expected sha256:5891b5b522d5 (6 bytes), on disk sha256:2cf24dba5fb0 (5 bytes)",
        ),
        (
            &Sides::VALIDATE,
            &public,
            &private,
            "  expected sha256:5891b5b522d5 (6 bytes), on disk 7 bytes (no hash of a file others may not read)",
        ),
        (
            &diff_sides,
            &private,
            &private,
            "  rendered-a 7 bytes, rendered-b 7 bytes (no hash of a file others may not read)",
        ),
    ];
    for (sides, old, new, want) in rows {
        assert_eq!(hash_line(sides, old, new), want);
    }
}
