//! How an event a peer can repeat at will is logged: its first time, then every 1,024th with
//! the count so far, so that a peer repeating it cannot fill the log (a backward call
//! dropped, a connect refused for its host's bound).

/// Whether the `n`th time (from 1) is logged.
pub(crate) fn logged(n: u64) -> bool {
    n == 1 || n.is_multiple_of(1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_and_every_1024th() {
        let logged: Vec<u64> = (1..=4096).filter(|&n| super::logged(n)).collect();
        assert_eq!(logged, [1, 1024, 2048, 3072, 4096]);
    }
}
