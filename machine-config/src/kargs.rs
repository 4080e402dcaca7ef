//! Kernel arguments: kernel-cmdline splitting, the `rpm-ostree kargs` argv and the on-disk check.

/// Whitespace in the C locale, as the kernel's cmdline parser sees it.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\u{c}' | '\n' | '\r' | '\t' | '\u{b}')
}

/// Splits one kernel command line with the kernel's rules: whitespace separates arguments,
/// double quotes group (and are kept), there is no escaping.
pub fn split(cmdline: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_quote = false;
    for c in cmdline.chars() {
        if is_space(c) && !in_quote {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c == '"' {
            in_quote = !in_quote;
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Splits every MachineConfig `kernelArguments` entry and concatenates the tokens in order.
pub fn split_all(entries: &[String]) -> Vec<String> {
    entries.iter().flat_map(|e| split(e)).collect()
}

/// Whether the kernel arguments changed the way the MCD sees it: not both empty and not equal
/// entry by entry (order and duplicates matter).
pub fn changed(old: &[String], new: &[String]) -> bool {
    !(old.is_empty() && new.is_empty()) && old != new
}

/// The arguments for `rpm-ostree kargs`: `--delete-if-present=<arg>` for every old argument (in
/// order, duplicates kept) then `--append=<arg>` for every new one; empty when unchanged.
pub fn rpm_ostree_argv(old: &[String], new: &[String]) -> Vec<String> {
    if !changed(old, new) {
        return Vec::new();
    }
    let deletes = split_all(old)
        .into_iter()
        .map(|a| format!("--delete-if-present={a}"));
    let appends = split_all(new).into_iter().map(|a| format!("--append={a}"));
    deletes.chain(appends).collect()
}

/// Kernel arguments from `old` to `new` as `+arg -arg` (each entry split as the kernel does):
/// the arguments added, then those removed; `reordered` when only their order changed, empty
/// when nothing did.
pub fn human_change(old: &[String], new: &[String]) -> String {
    let (old, new) = (split_all(old), split_all(new));
    let mut left = old.clone();
    let mut added = Vec::new();
    for arg in &new {
        match left.iter().position(|a| a == arg) {
            Some(at) => {
                left.remove(at);
            }
            None => added.push(format!("+{arg}")),
        }
    }
    let removed = left.iter().map(|a| format!("-{a}"));
    let words: Vec<String> = added.into_iter().chain(removed).collect();
    if words.is_empty() && old != new {
        return "reordered".to_string();
    }
    words.join(" ")
}

/// The expected tokens missing from the node's kernel arguments (`rpm-ostree kargs` output).
/// Extra arguments on the node are fine. Unlike the MCD, which splits the node's side on bare
/// whitespace (so a quoted argument containing a space never matches), both sides are split with
/// the kernel's rules.
pub fn missing(expected: &[String], current: &str) -> Vec<String> {
    let have = split(current);
    split_all(expected)
        .into_iter()
        .filter(|t| !have.contains(t))
        .collect()
}

/// The MCD's on-disk check: `Err("missing expected kernel arguments: [a b]")` when tokens are
/// missing.
pub fn check(expected: &[String], current: &str) -> Result<(), String> {
    let missing = missing(expected, current);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "missing expected kernel arguments: {}",
            go_string_slice(&missing)
        ))
    }
}

/// Go's `%v` of a `[]string`: `[a b c]`.
pub fn go_string_slice(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn kernel_arguments_read_as_plus_and_minus() {
        let rows: &[(&[&str], &[&str], &str)] = &[
            (&[], &[], ""),
            (&["a"], &["a"], ""),
            (
                &[],
                &["nosmt", "mitigations=auto,nosmt"],
                "+nosmt +mitigations=auto,nosmt",
            ),
            (&["a b"], &["b"], "-a"),
            (&["a", "x=1"], &["x=2", "a"], "+x=2 -x=1"),
            (&["a", "b"], &["b", "a"], "reordered"),
            (&["a", "a"], &["a"], "-a"),
        ];
        for (old, new, want) in rows {
            assert_eq!(human_change(&s(old), &s(new)), *want, "{old:?} -> {new:?}");
        }
    }

    #[test]
    fn splits_like_the_kernel() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("   ", &[]),
            ("nosmt", &["nosmt"]),
            ("a=1  b=2\tc\n", &["a=1", "b=2", "c"]),
            ("foo=\"a b\" bar", &["foo=\"a b\"", "bar"]),
            ("\"quoted arg\" x", &["\"quoted arg\"", "x"]),
            ("a=\"unterminated b c", &["a=\"unterminated b c"]),
            ("x=a\\\"b c", &["x=a\\\"b c"]),
        ];
        for (input, want) in cases {
            assert_eq!(split(input), s(want), "{input:?}");
        }
    }

    #[test]
    fn argv_follows_the_mcd() {
        let cases: &[(&[&str], &[&str], &[&str])] = &[
            (&[], &[], &[]),
            (&["a", "b"], &["a", "b"], &[]),
            (&[], &["nosmt"], &["--append=nosmt"]),
            (&["nosmt"], &[], &["--delete-if-present=nosmt"]),
            (
                &["a b"],
                &["a", "b"],
                &[
                    "--delete-if-present=a",
                    "--delete-if-present=b",
                    "--append=a",
                    "--append=b",
                ],
            ),
            (
                &["b", "a"],
                &["a", "b"],
                &[
                    "--delete-if-present=b",
                    "--delete-if-present=a",
                    "--append=a",
                    "--append=b",
                ],
            ),
            (
                &["x", "x"],
                &["x", "y=\"1 2\""],
                &[
                    "--delete-if-present=x",
                    "--delete-if-present=x",
                    "--append=x",
                    "--append=y=\"1 2\"",
                ],
            ),
        ];
        for (old, new, want) in cases {
            assert_eq!(
                rpm_ostree_argv(&s(old), &s(new)),
                s(want),
                "{old:?} -> {new:?}"
            );
        }
    }

    #[test]
    fn on_disk_check() {
        let expected = s(&["nosmt foo=\"a b\"", "bar"]);
        assert_eq!(
            check(&expected, "root=/dev/vda nosmt foo=\"a b\" bar"),
            Ok(())
        );
        assert_eq!(
            check(&expected, "root=/dev/vda nosmt"),
            Err("missing expected kernel arguments: [foo=\"a b\" bar]".to_string())
        );
    }
}
