//! The FleetLock semaphore of one group, pure: the ids holding its slots. Locks are owned
//! (only the holder gives its slot back) and recursive (a holder asking again keeps its one
//! slot; giving back a slot not held is not an error).

/// Every slot of the group is held by others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    pub slots: u32,
    pub holders: Vec<String>,
}

/// Takes a slot for `id`, or keeps the one it holds. `Ok(true)`: `holders` changed.
pub fn lock(holders: &mut Vec<String>, id: &str, slots: u32) -> Result<bool, Full> {
    if holders.iter().any(|h| h == id) {
        return Ok(false);
    }
    if holders.len() >= slots as usize {
        return Err(Full {
            slots,
            holders: holders.clone(),
        });
    }
    holders.push(id.to_string());
    Ok(true)
}

/// Gives back `id`'s slot, if it holds one. Whether `holders` changed.
pub fn unlock(holders: &mut Vec<String>, id: &str) -> bool {
    let before = holders.len();
    holders.retain(|h| h != id);
    holders.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counting_semaphore_with_owned_recursive_slots() {
        // (operation, id, slots, want: Ok(changed) / Err(()) for full, holders after)
        type Row = (
            &'static str,
            &'static str,
            u32,
            Result<bool, ()>,
            &'static [&'static str],
        );
        let rows: &[Row] = &[
            ("lock", "a", 1, Ok(true), &["a"]),
            ("lock", "a", 1, Ok(false), &["a"]),   // recursive
            ("lock", "b", 1, Err(()), &["a"]),     // full
            ("unlock", "b", 1, Ok(false), &["a"]), // not b's: nothing
            ("unlock", "a", 1, Ok(true), &[]),
            ("unlock", "a", 1, Ok(false), &[]), // not held: fine
            ("lock", "b", 2, Ok(true), &["b"]),
            ("lock", "c", 2, Ok(true), &["b", "c"]),
            ("lock", "d", 2, Err(()), &["b", "c"]),
            ("lock", "c", 2, Ok(false), &["b", "c"]),
            // fewer slots configured than holders (a restart with a smaller count): no new
            // holder until enough give theirs back, the existing ones keep theirs
            ("lock", "d", 1, Err(()), &["b", "c"]),
            ("lock", "b", 1, Ok(false), &["b", "c"]),
        ];
        let mut holders = Vec::new();
        for (i, (op, id, slots, want, after)) in rows.iter().enumerate() {
            let got = match *op {
                "lock" => lock(&mut holders, id, *slots).map_err(|_| ()),
                _ => Ok(unlock(&mut holders, id)),
            };
            assert_eq!(&got, want, "row {i}: {op} {id}");
            assert_eq!(holders, *after, "row {i}: {op} {id}");
        }
    }
}
