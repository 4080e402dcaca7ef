//! The known name closest to a mistyped one, for "did you mean …?" hints: an unknown key in a
//! MachineConfig (`overwrte` → `overwrite`), in the agent's configuration fragments
//! (`pol_interval` → `poll_interval`), an unknown `MCO_AGENT_` variable. One rule for all.

/// The name of `known` closest to `name` when it is close enough to be a typo: an edit or two
/// (Levenshtein), fewer for short names, at most three; `None` for `colour` among `mode`,
/// `user`.
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    known
        .into_iter()
        .map(|k| (strsim::levenshtein(name, k), k))
        .filter(|(distance, _)| *distance <= limit)
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn typos_find_their_name_and_strangers_none() {
        let known = ["overwrite", "mode", "user", "poll_interval", "pool"];
        let rows: &[(&str, Option<&str>)] = &[
            ("overwrte", Some("overwrite")),
            ("pol_interval", Some("poll_interval")),
            ("mod", Some("mode")),
            ("pool", Some("pool")),
            ("colour", None),
            ("x", None),
            ("", None),
        ];
        for (name, want) in rows {
            assert_eq!(closest(name, known), *want, "{name}");
        }
    }
}
