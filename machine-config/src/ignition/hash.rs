//! Ignition's `verification.hash` syntax (`sha512-<hex>`, `sha256-<hex>`), checked when a config
//! is validated and used when file contents are decoded (`crate::contents`).

/// A parsed `verification.hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashFunction {
    Sha256,
    Sha512,
}

/// Splits `sha512-<hex>` into the function and the lowercase hex sum, checking its syntax.
/// The error is Ignition's wording.
pub fn parse_hash(hash: &str) -> Result<(HashFunction, String), &'static str> {
    let Some((function, sum)) = hash.split_once('-') else {
        return Err("malformed hash specifier");
    };
    let (f, len) = match function {
        "sha512" => (HashFunction::Sha512, 128),
        "sha256" => (HashFunction::Sha256, 64),
        _ => return Err("unrecognized hash function"),
    };
    if sum.len() != len {
        return Err("incorrect size for hash sum");
    }
    if !sum.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err("hash sum is not hexadecimal");
    }
    Ok((f, sum.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_syntax() {
        let ok512 = format!("sha512-{}", "a".repeat(128));
        assert_eq!(parse_hash(&ok512).unwrap().0, HashFunction::Sha512);
        assert_eq!(
            parse_hash("sha512").unwrap_err(),
            "malformed hash specifier"
        );
        assert_eq!(
            parse_hash("md5-00").unwrap_err(),
            "unrecognized hash function"
        );
        assert_eq!(
            parse_hash("sha256-00").unwrap_err(),
            "incorrect size for hash sum"
        );
        let nothex = format!("sha256-{}", "g".repeat(64));
        assert_eq!(
            parse_hash(&nothex).unwrap_err(),
            "hash sum is not hexadecimal"
        );
    }
}
